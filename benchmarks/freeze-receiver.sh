#!/usr/bin/env bash
# Three qs processes over loopback, as SlowReceiverTests sets them up: a GMS, a publisher alone in its region (group
# "load") and two receivers (groups "load" and "solo/i", so each has a region of its own). Optionally freezes the
# second receiver (SIGSTOP) for FREEZE seconds, PRE seconds after it started. Prints the first receiver's per-second
# counts and, with DESCRIBE=N, each node's protocol state every N seconds (stderr files in OUT).
#   N=15000000 PRE=3 FREEZE=6 SECONDS_LIMIT=60 benchmarks/freeze-receiver.sh
# Bounded: every process has --seconds SECONDS_LIMIT; the script kills what is left at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
N=${N:-15000000}; PRE=${PRE:-3}; FREEZE=${FREEZE:-6}; LIMIT=${SECONDS_LIMIT:-60}; DESCRIBE=${DESCRIBE:-0}
OUT=${OUT:-$(mktemp -d)}
dotnet build tools/qs -c Release -v q -nologo >/dev/null || exit 1
QS=tools/qs/bin/Release/net10.0/qs
GMS=127.0.0.1:$((20000 + RANDOM % 20000))
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; kill -CONT "${pids[@]}" 2>/dev/null' EXIT
$QS gms --listen "$GMS" --seconds "$LIMIT" --log-level Information >"$OUT/gms.out" 2>"$OUT/gms.err" & pids+=($!)
sleep 1
$QS node --gms "$GMS" --join load --publish "$N" --wait-regions 3 --seconds "$LIMIT" --linger "$LIMIT" --describe-every "$DESCRIBE" >"$OUT/pub.out" 2>"$OUT/pub.err" & pids+=($!)
sleep 2
$QS node --gms "$GMS" --join load --join solo/0 --expect "$N" --seconds "$LIMIT" --describe-every "$DESCRIBE" >"$OUT/r0.out" 2>"$OUT/r0.err" & r0=$!; pids+=($r0)
$QS node --gms "$GMS" --join load --join solo/1 --expect "$N" --seconds "$LIMIT" --describe-every "$DESCRIBE" >"$OUT/r1.out" 2>"$OUT/r1.err" & r1=$!; pids+=($r1)
if [ "$FREEZE" -gt 0 ]; then
  sleep "$PRE"; kill -STOP "$r1"; echo "froze receiver 2 for $FREEZE s"; sleep "$FREEZE"; kill -CONT "$r1"
fi
wait "$r0"
cut -d'|' -f1-2 "$OUT/r0.out"
echo "output in $OUT"
