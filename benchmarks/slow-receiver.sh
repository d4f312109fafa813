#!/usr/bin/env bash
# Issue 11's slow-receiver target, between real processes on loopback: a GMS, a publisher and two receivers, all in one
# group (so one region: the publisher is a member too). The second receiver's application reads at READ_RATE messages
# a second through its bounded queue (qs node --read-rate), the first as fast as they come. Run once per policy:
#   back-pressure: everyone goes at the slow reader's pace;
#   skip-ahead:    the publisher tells the slow one to skip after LAGGARD_MS; the others go at full speed.
# Prints, per policy, each receiver's per-second counts with its heap and working set (memory must stay flat), and the
# final lines. Bounded: every process has --seconds SECONDS_LIMIT; the script kills what is left at the end.
#   SECONDS_LIMIT=60 N=100000000 READ_RATE=20000 benchmarks/slow-receiver.sh   (N at most 100,000,000: qs node --publish)
set -uo pipefail
cd "$(dirname "$0")/.."
N=${N:-100000000}; LIMIT=${SECONDS_LIMIT:-60}; READ_RATE=${READ_RATE:-20000}; LAGGARD_MS=${LAGGARD_MS:-2000}
POLICIES=${POLICIES:-"back-pressure skip-ahead"}
OUT=${OUT:-$(mktemp -d)}
dotnet build tools/qs -c Release -v q -nologo >/dev/null || exit 1
QS=tools/qs/bin/Release/net10.0/qs
pids=()
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
for policy in $POLICIES; do
  GMS=127.0.0.1:$((20000 + RANDOM % 20000))
  dir="$OUT/$policy"; mkdir -p "$dir"
  flags=(--slow-receivers "$policy" --laggard-timeout-ms "$LAGGARD_MS" --seconds "$LIMIT")
  $QS gms --listen "$GMS" --seconds "$((LIMIT + 5))" >"$dir/gms.out" 2>"$dir/gms.err" & pids+=($!)
  sleep 1
  $QS node --gms "$GMS" --join load "${flags[@]}" >"$dir/fast.out" 2>"$dir/fast.err" & pids+=($!)
  $QS node --gms "$GMS" --join load --read-rate "$READ_RATE" "${flags[@]}" >"$dir/slow.out" 2>"$dir/slow.err" & pids+=($!)
  sleep 2
  $QS node --gms "$GMS" --join load --publish "$N" --wait-regions 1 --linger 0 "${flags[@]}" >"$dir/pub.out" 2>"$dir/pub.err" & pids+=($!)
  wait "${pids[@]:1}" # the nodes stop by themselves after --seconds
  kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; pids=()
  echo "== $policy (read rate $READ_RATE/s, laggard timeout $LAGGARD_MS ms, $LIMIT s)"
  for who in fast slow; do
    echo "-- $who receiver"
    grep -v '^ready' "$dir/$who.out" | awk 'NR % 5 == 0 || /final/'
  done
  echo "-- publisher"; grep final "$dir/pub.out" || { echo "the publisher printed no final line:"; head -3 "$dir/pub.out" "$dir/pub.err"; }
done
echo "output in $OUT"
