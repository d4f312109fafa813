#!/usr/bin/env bash
# What datagram security costs end to end (docs/security.md, "Cipher suites"): the comparison runner's QuickSilver
# series with security off, authenticate and encrypt side by side at each point, ROUNDS times over, then each secure
# series' throughput over the off series' at the same point and round, and the median per point over the rounds.
# Usage: benchmarks/security-cost.sh [ROUNDS=5] [CIPHER=aegis128l|aesgcm] [MESSAGES=1000000] [EXPERIMENT=receivers]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
cipher=${2:-aegis128l}
messages=${3:-1000000}
experiment=${4:-receivers}
out=$(mktemp -d /tmp/security-cost.XXXXXX)
dotnet build benchmarks/QuickSilver.Compare/QuickSilver.Compare.csproj -c Release -v q -nologo >/dev/null
for r in $(seq 1 "$rounds"); do
  dotnet benchmarks/QuickSilver.Compare/bin/Release/net10.0/QuickSilver.Compare.dll --quick --systems QuickSilver \
    --auth off,authenticate,encrypt --cipher "$cipher" --only "$experiment" --messages "$messages" --output "$out/$r" >/dev/null
done
python3 - "$out" "$rounds" "$cipher" <<'PY'
import csv, glob, os, statistics, sys
out, rounds, cipher = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ratios = {}  # (experiment, receivers, groups, loss, mode) -> [ratio per round]
for r in range(1, rounds + 1):
    for path in glob.glob(os.path.join(out, str(r), "*.csv")):
        rows = list(csv.DictReader(open(path)))
        base = {(x["receivers"], x["groups"], x["loss"]): float(x["msgs_per_sec"]) for x in rows if x["system"] == "QuickSilver"}
        for x in rows:
            if x["system"].startswith("QuickSilver+"):
                key = (x["receivers"], x["groups"], x["loss"])
                if key in base and base[key] > 0:
                    mode = x["system"].split("+")[1]
                    ratios.setdefault((x["experiment"],) + key + (mode,), []).append(float(x["msgs_per_sec"]) / base[key])
print(f"cipher {cipher}, {rounds} rounds; secure msg/s over off msg/s at the same point in the same round")
print("| experiment | receivers | groups | loss | mode | median | min | max |")
print("|---|---:|---:|---:|---|---:|---:|---:|")
for key in sorted(ratios):
    v = ratios[key]
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | {statistics.median(v):.2f} | {min(v):.2f} | {max(v):.2f} |")
for mode in sorted({k[-1] for k in ratios}):
    allv = [x for k, v in ratios.items() if k[-1] == mode for x in v]
    print(f"all points, {mode}: median {statistics.median(allv):.2f} over {len(allv)} ratios")
PY
echo "runs kept in $out"
