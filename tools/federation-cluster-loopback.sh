#!/usr/bin/env bash
# A clustered gateway on this machine, every part its own process (docs/federation.md, "Clustered gateway"):
#   island 1: multicast range 239.255.35.x; gateway g1 (TCP+UDP 127.0.0.1:47321)
#   island 2: multicast range 239.255.36.x, mediator 239.255.34.2:43209; gateway g2 = control node (127.0.0.1:47322,
#             admin :47332) with data nodes 201 (UDP 127.0.0.1:47421) and 202 (127.0.0.1:47422)
# A client of island 2 joins bfed://1/239.255.37.1/43210; a source in island 1 sends COUNT messages; the data node
# that carries the session (201: least loaded, ties to the lower number) is killed; after the control node moved the
# session (heartbeat timeout 3 s) the source sends COUNT more. Exit code 0 when the client got all 2 x COUNT.
# MODE=continuous: the source sends 2 x COUNT at 1,000 msg/s through the kill; the client reports what was lost.
# The control node and its data nodes share a fresh cluster secret (--cluster-secret-file): control↔data frames are
# authenticated. The session is bulk, so g1 sends its DATA to the data node on a TCP bulk data channel.
# PEERING=1: g1, g2 and both data nodes also share a fresh peering secret (--peering-secret-file): the peering link and
# the bulk data channel authenticate both ends and are sealed (docs/federation.md, "Peering authentication").
# MODE=control-crash: g2 has a standby control node (127.0.0.1:47323, admin :47333, --standby --other-control); the
# data nodes heartbeat both (--standby-control) and g1 knows both addresses (--peer 2@primary,standby). After COUNT
# messages the primary control node is killed (kill -9: its links reset); once the standby took over (takeover 3 s)
# the source sends COUNT more. Exit code 0 when the client, which never re-joins, got all 2 x COUNT
# (docs/federation.md, "Standby control node"). With CONTINUOUS=1 the source sends 2 x COUNT at 1,000 msg/s through
# the kill and the client reports what was lost during the takeover.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-1000}
dotnet build tools/qs -c Release -v q -nologo >/dev/null
QS=tools/qs/bin/Release/net10.0/qs
pids=()
SECRET=$(mktemp)
head -c 32 /dev/urandom | base64 > "$SECRET"
PEERING_SECRET=$(mktemp)
head -c 32 /dev/urandom | base64 > "$PEERING_SECRET"
P=()
if [ "${PEERING:-}" = 1 ]; then P=(--peering-secret-file "$PEERING_SECRET"); fi
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -f "$SECRET" "$PEERING_SECRET"; }
trap cleanup EXIT
G2=(127.0.0.1:47322)
C=()
S=()
if [ "${MODE:-}" = control-crash ]; then
  G2=(127.0.0.1:47322,127.0.0.1:47323)
  C=(--other-control 127.0.0.1:47323)
  S=(--standby-control 127.0.0.1:47323)
fi
# g1 is not told g2's data nodes: it learns their addresses from g2's DATA_ENDPOINT frames.
$QS gateway --id 1 --island 1 --listen 127.0.0.1:47321 --peer "2@${G2[0]}" "${P[@]}" \
  --pool-base 239.255.35.0 --port-base 43300 --seconds 90 & pids+=($!)
$QS gateway --id 2 --island 2 --listen 127.0.0.1:47322 --admin 127.0.0.1:47332 --peer 1@127.0.0.1:47321 "${P[@]}" "${C[@]}" \
  --cluster-node 201@127.0.0.1:47421 --cluster-node 202@127.0.0.1:47422 --cluster-secret-file "$SECRET" \
  --pool-base 239.255.36.0 --port-base 43350 --mediator 239.255.34.2:43209 --seconds 90 & control=$!; pids+=($control)
if [ "${MODE:-}" = control-crash ]; then
  $QS gateway --id 2 --island 2 --listen 127.0.0.1:47323 --admin 127.0.0.1:47333 --peer 1@127.0.0.1:47321 "${P[@]}" \
    --standby --other-control 127.0.0.1:47322 \
    --cluster-node 201@127.0.0.1:47421 --cluster-node 202@127.0.0.1:47422 --cluster-secret-file "$SECRET" \
    --pool-base 239.255.36.0 --port-base 43350 --mediator 239.255.34.2:43209 --seconds 90 & pids+=($!)
fi
$QS gateway --data-node --id 201 --gateway 2 --island 2 --listen 127.0.0.1:47421 --control 127.0.0.1:47322 "${S[@]}" "${P[@]}" \
  --cluster-secret-file "$SECRET" --peer 1@127.0.0.1:47321 --pool-base 239.255.36.0 --port-base 43350 --seconds 90 & node201=$!; pids+=($node201)
$QS gateway --data-node --id 202 --gateway 2 --island 2 --listen 127.0.0.1:47422 --control 127.0.0.1:47322 "${S[@]}" "${P[@]}" \
  --cluster-secret-file "$SECRET" --peer 1@127.0.0.1:47321 --pool-base 239.255.36.0 --port-base 43350 --seconds 90 & pids+=($!)
sleep 4
$QS island-recv --mediator 239.255.34.2:43209 --session bfed://1/239.255.37.1/43210 --count $((2 * COUNT)) --seconds 60 & recv=$!
sleep 3
# The node to kill: data node 201, or with MODE=control-crash g2's primary control node (then the standby answers).
victim=$node201; what="data node 201"; admin=127.0.0.1:47332; settle=6
if [ "${MODE:-}" = control-crash ]; then victim=$control; what="g2's primary control node"; admin=127.0.0.1:47333; settle=8; fi
if [ "${MODE:-}" = continuous ] || [ "${CONTINUOUS:-}" = 1 ]; then
  # Send through the kill (1,000 msg/s for 2 x COUNT messages) and report what was lost meanwhile.
  $QS island-send --group 239.255.37.1:43210 --count $((2 * COUNT)) --size 1000 --rate 1000 & send=$!
  sleep $((COUNT / 2000 + 1))
  echo "killing $what (pid $victim)"
  kill -9 "$victim"
  wait $send
  $QS sessions --admin "$admin"
  wait $recv || true
  exit 0
fi
$QS island-send --group 239.255.37.1:43210 --count "$COUNT" --size 1000 --rate 1000
sleep 1
echo "killing $what (pid $victim)"
kill -9 "$victim"
sleep "$settle"
$QS sessions --admin "$admin"
$QS island-send --group 239.255.37.1:43210 --count "$COUNT" --size 1000 --rate 1000 --first "$COUNT"
status=0
wait $recv || status=$?
exit $status
