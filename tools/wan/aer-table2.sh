#!/usr/bin/env bash
# The AER/NCA seed's Table 2 in network namespaces (docs/aer.md): repair latency with and without repair servers, as
# a fraction of the round trip, with real qs processes. A sender site and three receiver sites (round trips to the
# source 20, 50 and 100 ms); in each receiver site host 1 runs a repair server and hosts 2-3 receivers. The same
# messages are sent twice: with the repair servers (the source subcasts to them) and without (receivers NAK the
# source). Prints one table row per site and configuration, and the bytes the source and the whole testbed moved.
# usage: sudo tools/wan/aer-table2.sh [RECEIVER_LOSS_PCT=2] [BACKBONE_LOSS_PCT=0] [MESSAGES=3000]
# Build first: dotnet build tools/qs -c Release && dotnet build tools/wan/QuickSilver.WanLink -c Release
set -euo pipefail
LOSS=${1:-2}; BLOSS=${2:-0}; MESSAGES=${3:-3000}
HERE=$(cd "$(dirname "$0")" && pwd)
QS=${QS:-$HERE/../qs/bin/Release/net10.0/qs}
TB="$HERE/testbed.sh"
WORK=$(mktemp -d /tmp/qswan-aer.XXXXXX)
cleanup() { "$TB" down; rm -rf "$WORK"; }
# Tear-down is guaranteed: on exit, and on SIGINT/SIGTERM (a timeout), which exit through the same trap.
trap cleanup EXIT
trap 'exit 130' INT TERM
GROUP=239.255.77.1:47100
SITES=(a b c); DELAYS=(5 20 45); SRC_DELAY=5
"$TB" up s=$SRC_DELAY,0,1,0 a=${DELAYS[0]},$BLOSS,3,0 b=${DELAYS[1]},$BLOSS,3,0 c=${DELAYS[2]},$BLOSS,3,0
for s in "${SITES[@]}"; do for h in 2 3; do "$TB" loss $s $h "$LOSS"; done; done
SRC=$("$TB" ip s 1):47200
run() { local ns=$1; shift; exec ip netns exec "$ns" nice -n 10 "$QS" "$@"; }
# Bytes on the wire: every frame on every link, both ways, each link counted once (the four backbone links are the
# backbone bridge's ports u<i>p, the host links the site bridges' ports h<i>x<j>) except the repair servers' own links
# (h<i>x1 of the receiver sites: the seed's repair servers sit in the routers), and what the source sent (its eth0).
bytes() { ip netns exec "${QSWAN_PREFIX:-qswan}-core" ip -s -j link show | python3 -c 'import json,re,sys; print(sum(l["stats64"]["rx"]["bytes"] + l["stats64"]["tx"]["bytes"] for l in json.load(sys.stdin) if re.fullmatch(r"u\d+p|h1x1|h\d+x[2-9]", l["ifname"])))'; }
srcbytes() { ip netns exec "$("$TB" ns s 1)" ip -s -j link show eth0 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["bytes"])'; }

for mode in with without; do
  pids=(); receivers=()
  b0=$(bytes); s0=$(srcbytes)
  children=()
  for s in "${SITES[@]}"; do
    rs=$("$TB" ip $s 1):47200; r2=$("$TB" ip $s 2):47200; r3=$("$TB" ip $s 3):47200
    if [[ $mode == with ]]; then
      run "$("$TB" ns $s 1)" repair-server --listen $rs --group $GROUP --source $SRC --children $r2,$r3 --seconds 120 >"$WORK/$mode-rs-$s.log" 2>&1 & pids+=($!)
      children+=($rs)
    fi
    for h in 2 3; do
      run "$("$TB" ns $s $h)" aer-receive --listen $("$TB" ip $s $h):47200 --group $GROUP --source $SRC --expect "$MESSAGES" --seconds 120 >"$WORK/$mode-r-$s$h.log" 2>&1 & receivers+=($!)
    done
  done
  sleep 3 # processes start (JIT) and the repair servers bind before the first SPM
  kids=(); [[ ${#children[@]} -gt 0 ]] && kids=(--children "$(IFS=,; echo "${children[*]}")")
  run "$("$TB" ns s 1)" aer-send --listen $SRC --group $GROUP "${kids[@]}" --messages "$MESSAGES" --start-after-ms 1500 --linger 3 --seconds 120 >"$WORK/$mode-send.log" 2>&1 & sender=$!
  failed=0; for p in "${receivers[@]}"; do wait "$p" || failed=$((failed + 1)); done
  # Once every receiver is done: the source exits after its linger; the repair servers are stopped.
  wait "$sender" || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  echo "mode=$mode backbone_bytes=$(( $(bytes) - b0 )) source_bytes=$(( $(srcbytes) - s0 )) receivers_failed=$failed"
  { grep -h "sender summary" "$WORK/$mode-send.log" || echo "sender summary: none"; } | sed "s/^/mode=$mode /"
  for i in 0 1 2; do
    s=${SITES[$i]}; rtt=$(( 2 * (SRC_DELAY + ${DELAYS[$i]}) ))
    for h in 2 3; do
      line=$(grep -h "repair latency" "$WORK/$mode-r-$s$h.log" || echo "repair latency: none")
      echo "mode=$mode site=$s host=$h rtt_ms=$rtt $line; $(grep -h -E '^(received all|FAILED)' "$WORK/$mode-r-$s$h.log" || echo 'no result')"
    done
  done
done
