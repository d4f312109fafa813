#!/usr/bin/env bash
# Issue 17's reference rate (docs/dissemination.md): how many MB/s per receiver raw UDP multicast reaches on the same
# testbed as files-vs-uftp-udpcast.sh (one sender host, four receiver hosts on one site bridge, no loss), at the
# datagram size qs files sends by default (1,472 bytes: 1,456 of page and its 16-byte header), beside qs files with its
# rate cap set far above what the machine carries.
#   sockperf: `sockperf tp` multicasts for SECONDS at full speed (no rate limit) from the sender host; each receiver
#             host runs `sockperf sr` joined to the group. Per receiver, MB/s = UDP datagrams its kernel delivered
#             (InDatagrams of the host's /proc/net/snmp, before and after) x 1,472 / SECONDS; the kernel's receive-buffer
#             drops are printed too.
#   qs files: tools/wan/files-vs-uftp-udpcast.sh MB 0 RATE qs (4 channels, RATE/4 each, default 400,000,000 B/s in all).
# Both bounded: sockperf by SECONDS, qs by that script's limits. Needs root (namespaces) and sockperf
# (benchmarks/sockperf/install.sh).
# usage: sudo tools/wan/files-vs-sockperf.sh [SECONDS=10] [MB=200] [RATE=400000000]
set -euo pipefail
SECONDS_RUN=${1:-10}; MB=${2:-200}; RATE=${3:-400000000}
HERE=$(cd "$(dirname "$0")" && pwd)
TB="$HERE/testbed.sh"
SIZE=1472
GROUP=239.255.17.9; PORT=7199
command -v sockperf >/dev/null || { echo "missing sockperf: run benchmarks/sockperf/install.sh" >&2; exit 1; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; "$TB" down; }
trap cleanup EXIT
trap 'exit 130' INT TERM
"$TB" up f=0,0,5,0
SNS=$("$TB" ns f 1); SIP=$("$TB" ip f 1)
snmp() { ip netns exec "$1" awk -v col="$2" '/^Udp:/ { if (h) { print $col } else { h = 1 } }' /proc/net/snmp; }
for c in 2 3 4 5; do
  ns=$("$TB" ns f $c)
  ip netns exec "$ns" ip route add 224.0.0.0/4 dev eth0 2>/dev/null || true
  timeout $((SECONDS_RUN + 20)) ip netns exec "$ns" nice -n 10 sockperf sr -i $GROUP -p $PORT >/dev/null 2>&1 & pids+=($!)
done
ip netns exec "$SNS" ip route add 224.0.0.0/4 dev eth0 2>/dev/null || true
sleep 1
declare -A in0 drop0
for c in 2 3 4 5; do ns=$("$TB" ns f $c); in0[$c]=$(snmp "$ns" 2); drop0[$c]=$(snmp "$ns" 6); done
echo "sockperf: $SECONDS_RUN s of $SIZE-byte datagrams to $GROUP from $SIP, no rate limit"
timeout $((SECONDS_RUN + 20)) ip netns exec "$SNS" nice -n 10 sockperf tp -i $GROUP -p $PORT -m $SIZE -t "$SECONDS_RUN" 2>&1 | grep -E "Summary|Total" || true
sleep 1
for c in 2 3 4 5; do
  ns=$("$TB" ns f $c)
  got=$(( $(snmp "$ns" 2) - in0[$c] )); dropped=$(( $(snmp "$ns" 6) - drop0[$c] ))
  awk -v c=$c -v got=$got -v d=$dropped -v s=$SIZE -v t=$SECONDS_RUN 'BEGIN { printf "RESULT system=sockperf receiver=%d datagrams=%d MBps=%.2f rcvbuf_drops=%d\n", c, got, got * s / t / 1e6, d }'
done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
pids=()
"$TB" down
trap - EXIT
QS_GET_ARGS="--json ${QS_GET_ARGS:-}" "$HERE/files-vs-uftp-udpcast.sh" "$MB" 0 "$RATE" qs
