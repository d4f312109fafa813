#!/usr/bin/env bash
# Two islands on this machine through two gateways, every part its own process (docs/federation.md, "Two islands"):
#   island 1: multicast range 239.255.31.x, mediator 239.255.30.1:43108; gateway g1 (TCP 127.0.0.1:47301, admin :47311)
#   island 2: multicast range 239.255.32.x, mediator 239.255.30.2:43109; gateway g2 (TCP 127.0.0.1:47302, admin :47312)
# A source publishes the session bfed://1/239.255.33.1/43110 in island 1; a client of island 2 joins it through its
# mediator and must receive every message. Exit code 0 when it did.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-2000}
dotnet build tools/qs -c Release -v q -nologo >/dev/null
QS=tools/qs/bin/Release/net10.0/qs
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
$QS gateway --id 1 --island 1 --listen 127.0.0.1:47301 --admin 127.0.0.1:47311 --peer 2@127.0.0.1:47302 \
  --pool-base 239.255.31.0 --port-base 43000 --mediator 239.255.30.1:43108 --seconds 120 & pids+=($!)
$QS gateway --id 2 --island 2 --listen 127.0.0.1:47302 --admin 127.0.0.1:47312 --peer 1@127.0.0.1:47301 \
  --pool-base 239.255.32.0 --port-base 43050 --mediator 239.255.30.2:43109 --seconds 120 & pids+=($!)
sleep 3
$QS island-recv --mediator 239.255.30.2:43109 --session bfed://1/239.255.33.1/43110 --count "$COUNT" --seconds 60 & recv=$!
sleep 2
$QS island-send --group 239.255.33.1:43110 --count "$COUNT" --size 1000 --rate 2000
status=0
wait $recv || status=$?
$QS sessions --admin 127.0.0.1:47312
$QS sessions --admin 127.0.0.1:47311
exit $status
