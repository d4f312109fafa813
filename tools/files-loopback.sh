#!/usr/bin/env bash
# One qs files server and four qs files get clients on this machine over loopback multicast: each client fetches
# FILES files of MB megabytes of random bytes; prints each client's JSON summary, whether its copy is identical, and
# the server's last status. Build first: dotnet build tools/qs -c Release.
# usage: tools/files-loopback.sh [RATE_PER_CHANNEL=2000000] [CHANNELS=4] [FILES=4] [MB=5]
set -euo pipefail
RATE=${1:-2000000}; CHANNELS=${2:-4}; FILES=${3:-4}; MB=${4:-5}
QS=${QS:-"$(cd "$(dirname "$0")" && pwd)/qs/bin/Release/net10.0/qs"}
WORK=$(mktemp -d /tmp/qs-files-loopback.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/src"
NAMES=()
for i in $(seq 0 $((FILES - 1))); do head -c $((MB * 1000000)) /dev/urandom > "$WORK/src/f$i.bin"; NAMES+=("f$i.bin"); done
PORT=$((47300 + RANDOM % 500))
"$QS" files serve "$WORK/src" --listen 127.0.0.1:$PORT --multicast 239.255.93.1:$((7400 + RANDOM % 500)) --rate "$RATE" --channels "$CHANNELS" --seconds 120 --json > "$WORK/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do grep -q serving "$WORK/serve.log" 2>/dev/null && break; sleep 0.1; done
CLIENTS=()
for c in $(seq 1 ${CLIENTS_N:-4}); do "$QS" files get "${NAMES[@]}" --out "$WORK/out$c" --server 127.0.0.1:$PORT --json --timeout 100 > "$WORK/get$c.log" 2>&1 & CLIENTS+=($!); done
wait "${CLIENTS[@]}" || true
sleep 1.2
for c in $(seq 1 ${CLIENTS_N:-4}); do
  grep summary "$WORK/get$c.log" || echo "client $c: no summary"
  same=identical; for n in "${NAMES[@]}"; do cmp -s "$WORK/src/$n" "$WORK/out$c/$n" || same=DIFFERENT; done; echo "client $c: $same"
done
kill $SERVER 2>/dev/null || true
grep status "$WORK/serve.log" | tail -n 1
