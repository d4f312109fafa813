#!/usr/bin/env python3
"""Summarises the output of aer-table2.sh (one or more runs, each after a "=== ..." line) as the seed's Table 2:
per site, the mean repair latency with (ML1) and without (ML0) repair servers over the site's receivers (weighted by
repairs), ML1/RT, ML0/RT, ML1/ML0, and the link bytes saved. usage: aer-table2.sh ... | table2-summary.py"""
import re
import sys

runs, current = [], None
for line in sys.stdin:
    if line.startswith("==="):
        current = {"title": line.strip("= \n"), "lat": {}, "bytes": {}, "rate": {}, "failed": 0}
        runs.append(current)
        continue
    if current is None:
        continue
    m = re.match(r"mode=(\w+) (?:backbone|link)_bytes=(\d+) .*receivers_failed=(\d+)", line)
    if m:
        current["bytes"][m.group(1)] = int(m.group(2))
        current["failed"] += int(m.group(3))
    m = re.match(r"mode=(\w+) sender summary: .* = ([0-9.]+) packets/s", line)
    if m:
        current["rate"][m.group(1)] = float(m.group(2))
    m = re.match(r"mode=(\w+) site=(\w) host=\d rtt_ms=(\d+) repair latency: (\d+) repaired, mean ([0-9.]+) ms", line)
    if m:
        key = (m.group(1), m.group(2))
        s, n, _ = current["lat"].get(key, (0.0, 0, 0))
        current["lat"][key] = (s + float(m.group(5)) * int(m.group(4)), n + int(m.group(4)), int(m.group(3)))

for run in runs:
    print(f"{run['title']}: receivers that failed {run['failed']}; source rate with RS "
          f"{run['rate'].get('with', 0):.0f} packets/s, without {run['rate'].get('without', 0):.0f}")
    print("| site | RTT | ML1 (with RS) | ML0 (without) | ML1/RT | ML0/RT | ML1/ML0 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for site in "abc":
        w, wo = run["lat"].get(("with", site)), run["lat"].get(("without", site))
        if not w or not wo or not w[1] or not wo[1]:
            continue
        ml1, ml0, rtt = w[0] / w[1], wo[0] / wo[1], w[2]
        print(f"| {site} | {rtt} ms | {ml1:.1f} ms | {ml0:.1f} ms | {ml1 / rtt:.2f} | {ml0 / rtt:.2f} | {ml1 / ml0:.2f} |")
    b = run["bytes"]
    if "with" in b and "without" in b:
        print(f"link bytes with RS {b['with']}, without {b['without']}, saving {1 - b['with'] / b['without']:.0%}")
    print()
