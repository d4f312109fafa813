#!/usr/bin/env bash
# AER against NORM on one topology (docs/aer.md, "NORM comparison"): a source site and a receiver site 50 ms apart
# (round trip: 5 ms + 20 ms of relay delay each way), RECEIVER_LOSS % random loss (nftables) at each of two
# receivers; host 1 of the receiver site runs AER's repair server in the "aer-rs" configuration and nothing else.
# The same MESSAGES x SIZE bytes go out, in each round, once per configuration in turn on the same testbed:
#   norm    benchmarks/norm's norm-send / norm-recv: one NORM stream, NORM-CC on, NACK repairs with parity (FEC);
#           FEC blocks of 64 packets with up to 16 parity packets (what NRL's own tools use)
#   norm-free  as norm, but the application writes whenever the stream has room (NORM's own flow control only):
#           norm-send otherwise writes one message at a time and waits for NORM_TX_QUEUE_EMPTY, so that a message's
#           send stamp is close to its transmission; that wait can cost NORM throughput, this run shows how much
#           (its delays include the time messages queue in the 4 MB stream buffer, so only its rate counts)
#   norm-fast  blocks of 16 with up to 4 parity (NORM repairs per block: a smaller block repairs sooner), NACK
#           backoff factor 0 (no random NACK wait: right for two receivers) and a first GRTT estimate of 50 ms
#           (NORM's default is 0.5 s): NORM tuned for this small group and path
#   aer     qs aer-send / qs aer-receive --json: NCA on, no repair server (receivers NAK the source)
#   aer-rs  the same with qs repair-server in the receivers' site (the source subcasts to it)
# Every message carries its number and its send time (monotonic clock); each receiver prints one JSON line with
# the time from the first message's send to its last delivery, and per-message delays (tools/qs/DelayStats.cs and
# benchmarks/norm/src/delay_stats.c define them the same way). The summary gives, per configuration (means over
# rounds): time to deliver everything to every receiver, MB/s, late messages and their extra delay (repair plus
# head-of-line wait), the bytes the source sent, and AER / NORM ratios.
# usage: sudo tools/wan/aer-vs-norm.sh [MESSAGES=20000] [SIZE=1000] [RECEIVER_LOSS_PCT=1] [ROUNDS=2] [CONFIGS="norm norm-free norm-fast aer aer-rs"]
# Build first: dotnet build tools/qs -c Release && dotnet build tools/wan/QuickSilver.WanLink -c Release &&
#              benchmarks/norm/build.sh
set -euo pipefail
MESSAGES=${1:-20000}; SIZE=${2:-1000}; LOSS=${3:-1}; ROUNDS=${4:-2}; CONFIGS=${5:-norm norm-free norm-fast aer aer-rs}
HERE=$(cd "$(dirname "$0")" && pwd)
QS=${QS:-$HERE/../qs/bin/Release/net10.0/qs}
NORM=${NORM_BUILD:-$HERE/../../benchmarks/norm/build}
TB="$HERE/testbed.sh"
# Its own namespaces (testbed.sh down removes every PREFIX-*), so another testbed on this machine is left alone.
export QSWAN_PREFIX=${QSWAN_PREFIX:-qsnorm}
LIMIT=${QSWAN_RUN_SECONDS:-300}
for f in "$QS" "$NORM/norm-send" "$NORM/norm-recv"; do [[ -x $f ]] || { echo "aer-vs-norm: $f not built (see the usage line)" >&2; exit 2; }; done
[[ $MESSAGES =~ ^[1-9][0-9]*$ && $SIZE =~ ^[0-9]+$ && $SIZE -ge 16 && $SIZE -le 1400 && $LOSS =~ ^[0-9]+$ && $ROUNDS =~ ^[1-9][0-9]?$ ]] ||
  { echo "aer-vs-norm: want MESSAGES >= 1, 16 <= SIZE <= 1400, RECEIVER_LOSS_PCT an integer, 1 <= ROUNDS <= 99" >&2; exit 2; }
WORK=$(mktemp -d /tmp/qswan-norm.XXXXXX)
cleanup() { "$TB" down; rm -rf "$WORK"; }
# Tear-down is guaranteed: on exit, and on SIGINT/SIGTERM (a timeout), which exit through the same trap.
trap cleanup EXIT
trap 'exit 130' INT TERM
"$TB" up s=5,0,1,0 r=20,0,3,0
for h in 2 3; do "$TB" loss r $h "$LOSS"; done
S1=$("$TB" ns s 1); R1=$("$TB" ns r 1)
SRC=$("$TB" ip s 1):47200; RS=$("$TB" ip r 1):47200
GROUP_IP=239.255.81.1
srcbytes() { ip netns exec "$S1" ip -s -j link show eth0 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["bytes"])'; }
inns() { local ns=$1; shift; exec ip netns exec "$ns" "$@"; }

# Waits for the receivers ($2...), then stops the source ($1): it answers NAKs until every receiver is done.
finish() {
  local sender=$1; shift
  for p in "$@"; do wait "$p" || true; done
  kill -TERM "$sender" 2>/dev/null || true
  wait "$sender" || true
}

run_norm() { # $1 = output prefix, $2 = FEC block, $3 = parity, then extra norm-send options
  local port=$((47300 + RANDOM % 1000)) recv=() prefix=$1 block=$2 parity=$3
  shift 3
  for h in 2 3; do
    inns "$("$TB" ns r $h)" nice -n 10 "$NORM/norm-recv" --addr $GROUP_IP --port $port --iface eth0 --id $h --size "$SIZE" \
      --expect "$MESSAGES" --seconds "$LIMIT" >"$prefix-r$h.log" 2>&1 & recv+=($!)
  done
  sleep 1
  inns "$S1" nice -n 10 "$NORM/norm-send" --addr $GROUP_IP --port $port --iface eth0 --id 1 --messages "$MESSAGES" \
    --size "$SIZE" --block "$block" --parity "$parity" --cc on --group-size 2 --linger "$LIMIT" --seconds "$LIMIT" "$@" >"$prefix-send.log" 2>&1 & local sender=$!
  finish "$sender" "${recv[@]}"
}

run_aer() { # $1 = output prefix, $2 = with|without repair server
  local port=$((47100 + RANDOM % 100)) recv=() rs=() kids=()
  if [[ $2 == with ]]; then
    inns "$R1" nice -n 10 "$QS" repair-server --listen "$RS" --group $GROUP_IP:$port --source "$SRC" \
      --children "$("$TB" ip r 2):47200,$("$TB" ip r 3):47200" --seconds "$LIMIT" >"$1-rs.log" 2>&1 & rs+=($!)
    kids=(--children "$RS")
  fi
  for h in 2 3; do
    inns "$("$TB" ns r $h)" nice -n 10 "$QS" aer-receive --listen "$("$TB" ip r $h):47200" --group $GROUP_IP:$port \
      --source "$SRC" --expect "$MESSAGES" --seconds "$LIMIT" --json >"$1-r$h.log" 2>&1 & recv+=($!)
  done
  sleep 3 # processes start (JIT) and the repair server binds before the first SPM
  inns "$S1" nice -n 10 "$QS" aer-send --listen "$SRC" --group $GROUP_IP:$port "${kids[@]}" --messages "$MESSAGES" \
    --size "$SIZE" --start-after-ms 1500 --linger "$LIMIT" --seconds "$LIMIT" >"$1-send.log" 2>&1 & local sender=$!
  finish "$sender" "${recv[@]}"
  for p in "${rs[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}

for round in $(seq 1 "$ROUNDS"); do
  for cfg in $CONFIGS; do
    out="$WORK/$cfg-$round"
    b0=$(srcbytes)
    case $cfg in
      norm) run_norm "$out" 64 16 ;;
      norm-fast) run_norm "$out" 16 4 --backoff 0 --grtt-ms 50 ;;
      norm-free) run_norm "$out" 64 16 --batch 1000000 ;;
      aer) run_aer "$out" without ;;
      aer-rs) run_aer "$out" with ;;
      *) echo "aer-vs-norm: unknown configuration '$cfg' (norm, norm-free, norm-fast, aer, aer-rs)" >&2; exit 2 ;;
    esac
    echo "round=$round cfg=$cfg source_bytes=$(( $(srcbytes) - b0 ))" | tee -a "$WORK/runs"
    for h in 2 3; do
      line=$(grep -h '^{' "$out-r$h.log" | tail -1 || true)
      echo "round=$round cfg=$cfg receiver=$h ${line:-no result: $(tail -2 "$out-r$h.log" | tr '\n' ' ')}" | tee -a "$WORK/runs"
    done
    grep -h -E '^(\{|sender summary)' "$out-send.log" | sed "s/^/round=$round cfg=$cfg sender /" || true
  done
done
python3 "$HERE/aer-vs-norm-summary.py" "$MESSAGES" "$SIZE" <"$WORK/runs"
