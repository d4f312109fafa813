#!/usr/bin/env bash
# NCA against real Linux TCP (iperf3) over shared tbf bottlenecks in network namespaces (docs/aer.md), in the spirit
# of the AER/NCA seed's configurations A and B (§6). 1,000-byte AER payloads; TCP is iperf3 with the kernel's reno
# (the seed's New Reno) unless CC is given. Both run for SECONDS; rates are averaged after a WARMUP.
#   A: one link of 1 Mbit/s (~125 packets/s), 60 ms one way, a 30-packet queue (30,000 B), from the source site to
#      a site with two NCA receivers; TCP flows from the source site to that site (TCP_FLOWS, default 1).
#   B: the source site feeds two sites over equal 1.6 Mbit/s (~200 packets/s) downlinks, 30 ms one way; each has an
#      NCA receiver and two TCP flows from the source site (four TCP flows in all).
# Prints NCA's and each TCP flow's payload rate (kbit/s and 1,000-byte packets/s) and NCA's share / TCP's mean.
# usage: sudo tools/wan/nca-vs-tcp.sh [A|B] [SECONDS=60] [TCP_FLOWS=1] [CC=reno] [WARMUP=10]
set -euo pipefail
CONFIG=${1:-A}; SECONDS_=${2:-60}; TCPN=${3:-1}; CC=${4:-reno}; WARMUP=${5:-10}
HERE=$(cd "$(dirname "$0")" && pwd)
QS=${QS:-$HERE/../qs/bin/Release/net10.0/qs}
TB="$HERE/testbed.sh"
WORK=$(mktemp -d /tmp/qswan-nca.XXXXXX)
cleanup() { "$TB" down; rm -rf "$WORK"; }
# Tear-down is guaranteed: on exit, and on SIGINT/SIGTERM (a timeout), which exit through the same trap.
trap cleanup EXIT
trap 'exit 130' INT TERM
GROUP=239.255.78.1:47100
case $CONFIG in
  A) "$TB" up s=30,0,2,0 r=30,0,3,0
     "$TB" uplink-rate s 1mbit 30000 up
     NCA_RECEIVERS=("r 1" "r 2"); TCP_TARGETS=(); for f in $(seq 1 "$TCPN"); do TCP_TARGETS+=("r 3"); done ;;
  B) "$TB" up s=10,0,2,0 x=20,0,3,0 y=20,0,3,0
     "$TB" uplink-rate x 1.6mbit 30000 down
     "$TB" uplink-rate y 1.6mbit 30000 down
     NCA_RECEIVERS=("x 1" "y 1"); TCP_TARGETS=("x 2" "x 3" "y 2" "y 3") ;;
  *) echo "nca-vs-tcp: CONFIG must be A or B" >&2; exit 2 ;;
esac
SRC=$("$TB" ip s 1):47200
run() { local ns=$1; shift; exec ip netns exec "$ns" nice -n 10 "$@"; }
pids=()
for r in "${NCA_RECEIVERS[@]}"; do
  set -- $r
  run "$("$TB" ns $1 $2)" "$QS" aer-receive --listen "$("$TB" ip $1 $2)":47200 --group $GROUP --source $SRC --seconds $((SECONDS_ + 30)) >"$WORK/recv-$1$2.log" 2>&1 & pids+=($!)
done
port=5201
for t in "${TCP_TARGETS[@]}"; do
  set -- $t
  run "$("$TB" ns $1 $2)" iperf3 -s -p $port -1 >"$WORK/iperf-server-$port.log" 2>&1 & pids+=($!)
  port=$((port + 1))
done
sleep 3
run "$("$TB" ns s 1)" "$QS" aer-send --listen $SRC --group $GROUP --messages 10000000 --start-after-ms 500 --linger 0 --seconds "$SECONDS_" >"$WORK/send.log" 2>&1 & sender=$!
port=5201; clients=()
for t in "${TCP_TARGETS[@]}"; do
  set -- $t
  run "$("$TB" ns s 2)" iperf3 -c "$("$TB" ip $1 $2)" -p $port -t "$SECONDS_" -C "$CC" -i 1 -J >"$WORK/iperf-$port.json" 2>"$WORK/iperf-$port.err" & clients+=($!)
  port=$((port + 1))
done
wait $sender || true
for c in "${clients[@]}"; do wait "$c" || true; done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
echo "config $CONFIG, $SECONDS_ s, TCP $CC x ${#TCP_TARGETS[@]}, rates averaged over seconds $WARMUP..$SECONDS_"
grep -h "sender summary" "$WORK/send.log" || true
python3 - "$WORK" "$WARMUP" "$SECONDS_" "${#TCP_TARGETS[@]}" <<'PY'
import json, re, sys, glob
work, warm, secs, flows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
# NCA: the source prints "sent N, ..." once a second; payload 1,000 B per packet.
sent = [int(m.group(1)) for m in (re.match(r"sent (\d+),", l) for l in open(f"{work}/send.log")) if m]
span = sent[warm:secs] if len(sent) > warm + 1 else sent
nca = (span[-1] - span[0]) / max(len(span) - 1, 1) * 1000 * 8 / 1000  # kbit/s
tcps = []
for f in sorted(glob.glob(f"{work}/iperf-*.json")):
    try:
        j = json.load(open(f))
        iv = [i["sum"]["bits_per_second"] for i in j["intervals"]][warm:secs]
        tcps.append(sum(iv) / len(iv) / 1000)
    except Exception as e:
        print(f"{f}: no result ({e})"); tcps.append(0.0)
print(f"NCA: {nca:.0f} kbit/s = {nca / 8:.1f} packets/s")
for i, t in enumerate(tcps):
    print(f"TCP{i + 1}: {t:.0f} kbit/s = {t / 8:.1f} packets/s")
mean = sum(tcps) / len(tcps) if tcps else 0
print(f"NCA / mean TCP = {nca / mean:.2f}" if mean else "no TCP result")
PY
"$TB" stats | grep -A2 tbf | head -12
