#!/usr/bin/env python3
"""Summarises tools/wan/aer-vs-norm.sh's run lines (stdin): per configuration, means over rounds of the time to deliver
every message to every receiver (the slowest receiver's first-send-to-last-delivery span), MB/s of payload, late
messages per receiver and their extra delay (means over the two receivers), the bytes the source sent; then each
AER configuration's ratios to NORM (plain, its best throughput, its shortest repair delays). usage: aer-vs-norm-summary.py MESSAGES SIZE < runs"""
import json
import re
import sys
from collections import defaultdict

messages, size = int(sys.argv[1]), int(sys.argv[2])
runs = defaultdict(lambda: {"receivers": []})
for line in sys.stdin:
    m = re.match(r"round=(\d+) cfg=(\S+) (.*)", line.strip())
    if not m:
        continue
    key, rest = (m.group(2), int(m.group(1))), m.group(3)
    if rest.startswith("source_bytes="):
        runs[key]["source_bytes"] = int(rest.split("=")[1])
    elif rest.startswith("receiver="):
        body = rest.split(" ", 1)[1]
        runs[key]["receivers"].append(json.loads(body) if body.startswith("{") else None)

per_cfg = defaultdict(list)
for (cfg, rnd), run in sorted(runs.items()):
    rs = run["receivers"]
    ok = bool(rs) and all(r and r["delivered"] == messages and r["in_order"] and r.get("breaks", 0) == 0 for r in rs)
    if not ok:
        print(f"{cfg} round {rnd}: INCOMPLETE {rs}")
        continue
    deliver = max(r["span_s"] for r in rs)
    row = {
        "deliver_s": deliver,
        "mbps": messages * size / deliver / 1e6,
        "late": sum(r["late"] for r in rs) / len(rs),
        "extra_mean": sum(r["extra_mean_ms"] * r["late"] for r in rs) / max(sum(r["late"] for r in rs), 1),
        "extra_p50": sum(r["extra_p50_ms"] for r in rs) / len(rs),
        "extra_p95": sum(r["extra_p95_ms"] for r in rs) / len(rs),
        "delay_p50": sum(r["delay_p50_ms"] for r in rs) / len(rs),
        "source_mb": run.get("source_bytes", 0) / 1e6,
    }
    per_cfg[cfg].append(row)
    print(f"{cfg} round {rnd}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()))

cols = ["deliver_s", "mbps", "late", "extra_mean", "extra_p50", "extra_p95", "delay_p50", "source_mb"]
mean = {c: {k: sum(r[k] for r in rows) / len(rows) for k in cols} for c, rows in per_cfg.items()}
print()
print(f"| configuration | runs | time to deliver all, s | MB/s | late msgs / receiver | extra mean / p50 / p95, ms | delay p50, ms | source sent, MB |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for c, m in mean.items():
    print(f"| {c} | {len(per_cfg[c])} | {m['deliver_s']:.2f} | {m['mbps']:.2f} | {m['late']:.0f} | {m['extra_mean']:.1f} / {m['extra_p50']:.1f} / {m['extra_p95']:.1f} | {m['delay_p50']:.1f} | {m['source_mb']:.2f} |")
norms = {c: m for c, m in mean.items() if c.startswith("norm")}
if norms:
    # Each AER configuration against plain NORM, NORM's best throughput and NORM's shortest repair delays.
    fastest = max(norms, key=lambda c: norms[c]["mbps"])
    quickest = min(norms, key=lambda c: norms[c]["extra_mean"])
    for c, m in mean.items():
        if c in norms:
            continue
        for label, ref in (("norm", "norm"), ("fastest NORM", fastest), ("quickest-repairing NORM", quickest)):
            if ref not in norms:
                continue
            n = norms[ref]
            print(f"{c} / {label} ({ref}): throughput {m['mbps'] / n['mbps']:.2f}x, time {m['deliver_s'] / n['deliver_s']:.2f}x, "
                  f"late {m['late'] / max(n['late'], 1e-9):.2f}x, extra delay mean {m['extra_mean'] / max(n['extra_mean'], 1e-9):.2f}x, "
                  f"p95 {m['extra_p95'] / max(n['extra_p95'], 1e-9):.2f}x, source bytes {m['source_mb'] / max(n['source_mb'], 1e-9):.2f}x")
