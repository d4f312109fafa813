#!/usr/bin/env bash
# qs files against uftp and udpcast in network namespaces (docs/dissemination.md): one sender host and four receiver
# hosts on one site bridge (no delay relay on the path), the same files, the same rate cap for all three, with
# nftables random loss of LOSS % at every receiver (0 = none). For each system: time until every receiver has every
# byte (checked with cmp), bytes the sender's interface sent, CPU seconds of the sender and of all receivers.
#   qs files: one server (--channels 4 --rate RATE/4 each, --wait-clients 4 as udpcast gets --min-receivers 4), four `qs files get`; time = start of the clients to the
#             last client's exit (the clients' .NET start-up is inside it).
#   uftp:     four `uftpd` daemons waiting, then `uftp -R` (rate in kbit/s, congestion control none); time = uftp's run
#             (it ends when every client has confirmed every file).
#   udpcast:  four `udp-receiver`s waiting, then `udp-sender --min-receivers 4 --max-bitrate`; udpcast sends one
#             file, so it sends a tar of the same files (a few kB larger); time = sender start to the last receiver's exit.
# Every transfer is bounded: qs clients by --timeout, uftp by its own, udpcast by timeout LIMIT (default 150 s).
# QS_GET_ARGS adds options to every `qs files get` (e.g. --json for its counters), QS_SERVE_ARGS to `qs files serve`
# (e.g. --redundancy paper, or --packet-payload 1400 --page-size 56000); KEEP=1 keeps the logs in /tmp.
# usage: sudo tools/wan/files-vs-uftp-udpcast.sh [MB_TOTAL=200] [LOSS_PCT=0] [RATE_BYTES_PER_S=8000000] [SYSTEMS="qs uftp udpcast"]
set -euo pipefail
MB=${1:-200}; LOSS=${2:-0}; RATE=${3:-8000000}; SYSTEMS=${4:-qs uftp udpcast}; LIMIT=${LIMIT:-150}
HERE=$(cd "$(dirname "$0")" && pwd)
QS=${QS:-$HERE/../qs/bin/Release/net10.0/qs}
TB="$HERE/testbed.sh"
WORK=$(mktemp -d /tmp/qswan-files.XXXXXX)
cleanup() { "$TB" down; [[ -n ${KEEP:-} ]] || rm -rf "$WORK"; }
# Tear-down is guaranteed: on exit, and on SIGINT/SIGTERM (a timeout), which exit through the same trap.
trap cleanup EXIT
trap 'exit 130' INT TERM
for tool in uftp uftpd udp-sender udp-receiver /usr/bin/time; do command -v $tool >/dev/null || { echo "missing $tool: run tools/wan/install-deps.sh" >&2; exit 1; }; done
"$TB" up f=0,0,5,0
for h in 2 3 4 5; do "$TB" loss f $h "$LOSS"; done
SNS=$("$TB" ns f 1); SIP=$("$TB" ip f 1)
mkdir -p "$WORK/src"
NAMES=()
for i in 0 1 2 3; do head -c $((MB * 250000)) /dev/urandom >"$WORK/src/f$i.bin"; NAMES+=("f$i.bin"); done
tar -C "$WORK/src" -cf "$WORK/all.tar" "${NAMES[@]}"
txbytes() { ip netns exec "$SNS" ip -s -j link show eth0 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["bytes"])'; }
# Runs a command in a namespace, niced, writing its CPU seconds (user + system) to FILE.cpu.
timed() { local ns=$1 out=$2; shift 2; exec ip netns exec "$ns" /usr/bin/time -f "%U %S" -o "$out.cpu" nice -n 10 "$@"; }
# Stops a process started by timed: the signal goes to the program, not to /usr/bin/time (which ignores SIGINT).
stop_timed() { local child; child=$(ps -o pid= --ppid "$1" || true); [[ -n $child ]] && kill -INT $child 2>/dev/null; wait "$1" 2>/dev/null || true; }
# UDP datagrams dropped for a full socket buffer on the four receiver hosts (they did not keep up).
rcvbuf() { local t=0 n; for c in 2 3 4 5; do n=$(ip netns exec "$("$TB" ns f $c)" awk '/^Udp:/ { if (h) { print $6 } else { h = 1 } }' /proc/net/snmp); t=$((t + n)); done; echo $t; }
cpu() { awk '{ s += $1 + $2 } END { printf "%.2f", s }' "$@"; }
now() { date +%s.%N; }
same() { local ok=0; for c in 2 3 4 5; do for n in "${NAMES[@]}"; do cmp -s "$WORK/src/$n" "$1/$c/$n" || ok=1; done; done; [[ $ok -eq 0 ]] && echo identical || echo DIFFERENT; }
echo "files: 4 x $((MB / 4)) MB, receiver loss $LOSS %, rate cap $RATE B/s ($((RATE * 8 / 1000)) kbit/s)"

for system in $SYSTEMS; do
  rm -rf "$WORK/out"; mkdir -p "$WORK/out"; for c in 2 3 4 5; do mkdir -p "$WORK/out/$c"; done
  tx0=$(txbytes); rb0=$(rcvbuf)
  case $system in
    qs)
      timed "$SNS" "$WORK/qs-server" "$QS" files serve "$WORK/src" --listen $SIP:47170 --multicast 239.255.17.1:7170 --channels 4 --rate $((RATE / 4)) --wait-clients 4 --seconds 600 ${QS_SERVE_ARGS:-} >"$WORK/qs-server.log" 2>&1 & server=$!
      for _ in $(seq 200); do grep -q serving "$WORK/qs-server.log" 2>/dev/null && break; sleep 0.1; done
      t0=$(now); clients=()
      for c in 2 3 4 5; do timed "$("$TB" ns f $c)" "$WORK/qs-client$c" "$QS" files get "${NAMES[@]}" --out "$WORK/out/$c" --server $SIP:47170 --timeout "$LIMIT" ${QS_GET_ARGS:-} >"$WORK/qs-client$c.log" 2>&1 & clients+=($!); done
      for p in "${clients[@]}"; do wait "$p" || true; done
      t1=$(now); stop_timed $server
      result=$(same "$WORK/out"); scpu=$(cpu "$WORK/qs-server.cpu"); rcpu=$(cpu "$WORK"/qs-client?.cpu) ;;
    uftp)
      pids=()
      for c in 2 3 4 5; do timed "$("$TB" ns f $c)" "$WORK/uftpd$c" uftpd -d -D "$WORK/out/$c" -I eth0 >"$WORK/uftpd$c.log" 2>&1 & pids+=($!); done
      sleep 1
      t0=$(now)
      (cd "$WORK/src" && timed "$SNS" "$WORK/uftp" uftp -R $((RATE * 8 / 1000)) -I eth0 -C none "${NAMES[@]}") >"$WORK/uftp.log" 2>&1 || true
      t1=$(now); sleep 0.5
      for p in "${pids[@]}"; do stop_timed "$p"; done
      result=$(same "$WORK/out"); scpu=$(cpu "$WORK/uftp.cpu"); rcpu=$(cpu "$WORK"/uftpd?.cpu) ;;
    udpcast)
      pids=()
      for c in 2 3 4 5; do timed "$("$TB" ns f $c)" "$WORK/udpr$c" timeout "$LIMIT" udp-receiver --file "$WORK/out/$c/all.tar" --interface eth0 --nokbd --mcast-rdv-address 239.255.90.1 >"$WORK/udpr$c.log" 2>&1 & pids+=($!); done
      sleep 1
      t0=$(now)
      timed "$SNS" "$WORK/udps" timeout "$LIMIT" udp-sender --file "$WORK/all.tar" --interface eth0 --min-receivers 4 --nokbd --mcast-rdv-address 239.255.90.1 --rexmit-hello-interval 200 --max-bitrate $((RATE * 8 / 1000))k >"$WORK/udps.log" 2>&1 & sender=$!
      for p in "${pids[@]}"; do wait "$p" || true; done
      t1=$(now); wait $sender || true
      result=identical; for c in 2 3 4 5; do cmp -s "$WORK/all.tar" "$WORK/out/$c/all.tar" || result=DIFFERENT; done
      scpu=$(cpu "$WORK/udps.cpu"); rcpu=$(cpu "$WORK"/udpr?.cpu) ;;
    *) echo "unknown system $system" >&2; exit 2 ;;
  esac
  tx=$(( $(txbytes) - tx0 ))
  echo "system=$system UDP datagrams the receivers' kernels dropped for a full socket buffer: $(( $(rcvbuf) - rb0 ))"
  python3 -c "import sys; t=$t1-$t0; print(f'RESULT system=$system loss=$LOSS seconds={t:.2f} sender_bytes=$tx ({$tx/($MB*1e6):.3f} x the files) sender_cpu_s=$scpu receivers_cpu_s=$rcpu per_receiver_MBps={$MB/t:.2f} copies=$result')"
  # qs with --json: each client's data phase (first data packet to every file verified, docs/dissemination.md), the
  # rate without the process start-up, the request round trip and the announcement delay: comparable to sockperf's.
  if [[ $system == qs ]] && grep -q '"dataSeconds":[0-9]' "$WORK"/qs-client?.log 2>/dev/null; then
    python3 - "$MB" "$WORK"/qs-client?.log <<'PY'
import json, sys
mb = float(sys.argv[1]); rates = []
for path in sys.argv[2:]:
    for line in open(path):
        if '"event":"summary"' in line and json.loads(line).get("dataSeconds"):
            rates.append(mb / json.loads(line)["dataSeconds"])
print(f"RESULT system=qs data_phase_MBps_per_receiver={' '.join(f'{r:.2f}' for r in rates)} min={min(rates):.2f}")
PY
  fi
done
