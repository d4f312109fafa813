#!/usr/bin/env bash
# The wide-area testbed on one machine (docs/testbed.md): network namespaces joined by veth pairs and Linux bridges,
# one-way delay from the project's own relay (qs-wanlink), loss from nftables (numgen random), bottlenecks from tc tbf.
#
#   testbed.sh up SITE=DELAY_MS,BACKBONE_LOSS_PCT,HOSTS,HOST_LOSS_PCT ...   build it (tears down an old one first)
#   testbed.sh down                                                        remove everything (idempotent)
#   testbed.sh ns SITE HOST        the namespace of host HOST (1-based) of SITE;   testbed.sh ip SITE HOST  its address
#   testbed.sh loss SITE HOST PCT  random loss of PCT % of what arrives at that host (nftables; 0 removes it)
#   testbed.sh rate SITE HOST RATE LIMIT   tbf on that host's egress (e.g. 1mbit 30kb): the bottleneck of what it sends
#   testbed.sh uplink-rate SITE RATE LIMIT [down|up]  tbf on the site's link (down: backbone -> site, the default;
#                                  up: site -> backbone): a bottleneck shared by every flow that crosses it
#   testbed.sh check               exit 0 if namespaces, veth, bridges and nftables work here, else print why, exit 1
#
# Shape: a core namespace (PREFIX-core) holds the backbone bridge qb0 and, per site i, a site bridge qb<i> joined to
# qb0 through two veth pairs with qs-wanlink between them (DELAY_MS each way: a round trip between two sites is
# 2 x (delay a + delay b)). Each host is a namespace PREFIX-<site><host> with eth0 (10.77.<i>.<host>/16) on its site
# bridge. BACKBONE_LOSS_PCT drops frames from the backbone into the site (nft bridge family in the core), so every
# host of the site loses them together; HOST_LOSS_PCT drops packets arriving at each host independently (nft inet
# input hook in the host). Bridges flood multicast (snooping off), so IP multicast reaches every host.
# Everything is bounded: the relay exits after QSWAN_SECONDS (default 1800) even if nobody tears it down.
set -euo pipefail
PREFIX=${QSWAN_PREFIX:-qswan}
HERE=$(cd "$(dirname "$0")" && pwd)
WANLINK=${QSWAN_WANLINK:-$HERE/QuickSilver.WanLink/bin/Release/net10.0/qs-wanlink}
CORE=$PREFIX-core
STATE=/tmp/$PREFIX.state
RELAY_SECONDS=${QSWAN_SECONDS:-1800}

in_core() { ip netns exec "$CORE" "$@"; }
# Random loss of N % of the packets arriving at a host (replaces an earlier rule; 0 removes it).
host_loss() {
  ip netns exec "$1" nft delete table inet qswan 2>/dev/null || true
  [[ $2 -gt 0 ]] || return 0
  ip netns exec "$1" nft add table inet qswan
  ip netns exec "$1" nft add chain inet qswan in '{ type filter hook input priority 0; }'
  ip netns exec "$1" nft add rule inet qswan in iifname eth0 numgen random mod 100 "<" "$2" counter drop
}
site_index() { awk -v s="$1" -F'[ =]' '$1 == s { print $2 }' "$STATE/sites" 2>/dev/null; }
offloads_off() { ip netns exec "$1" ethtool -K "$2" tx off tso off gso off gro off >/dev/null 2>&1 || true; }

down() {
  if [[ -f $STATE/relay.pid ]]; then
    kill "$(cat "$STATE/relay.pid")" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$(cat "$STATE/relay.pid")" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$(cat "$STATE/relay.pid")" 2>/dev/null || true
  fi
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$PREFIX-" || true); do
    # Kill whatever still runs inside (a test's leftovers), then the namespace and with it its veths.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$STATE"
}

check() {
  [[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)"; return 1; }
  for tool in ip tc nft ethtool; do command -v $tool >/dev/null || { echo "$tool not installed (run tools/wan/install-deps.sh)"; return 1; }; done
  [[ -x $WANLINK ]] || { echo "qs-wanlink not built ($WANLINK): dotnet build tools/wan/QuickSilver.WanLink -c Release"; return 1; }
  local probe=$PREFIX-probe$$
  ip netns add "$probe" 2>/dev/null || { echo "cannot create a network namespace (ip netns add failed)"; return 1; }
  local ok=0
  ip -n "$probe" link add qa type veth peer name qb 2>/dev/null || { echo "cannot create veth pairs"; ok=1; }
  [[ $ok -eq 0 ]] && { ip -n "$probe" link add qbr type bridge 2>/dev/null || { echo "cannot create bridges"; ok=1; }; }
  [[ $ok -eq 0 ]] && { ip netns exec "$probe" nft add table inet probe 2>/dev/null || { echo "nftables does not work in a namespace"; ok=1; }; }
  ip netns del "$probe"
  return $ok
}

up() {
  down
  check >/dev/null || { echo "testbed: $(check)" >&2; exit 1; }
  mkdir -p "$STATE"
  ip netns add "$CORE"
  in_core ip link set lo up
  in_core ip link add qb0 type bridge mcast_snooping 0
  in_core ip link set qb0 up
  # One site has no peer to reach: no relay and no uplink, since the relay would copy every multicast datagram of the
  # site to an empty backbone (half a core at 25,000 datagrams/s, measured: docs/testbed.md).
  local i=0 relay_args=() sites=$#
  for spec in "$@"; do
    i=$((i + 1))
    local site=${spec%%=*} rest=${spec#*=}
    IFS=, read -r delay bloss hosts hloss <<<"$rest"
    [[ $site =~ ^[a-z][a-z0-9]{0,5}$ && $delay =~ ^[0-9.]+$ && $bloss =~ ^[0-9]+$ && $hosts =~ ^[1-9][0-9]?$ && $hloss =~ ^[0-9]+$ ]] ||
      { echo "testbed: bad site '$spec' (want NAME=DELAY_MS,BACKBONE_LOSS_PCT,HOSTS,HOST_LOSS_PCT)" >&2; down; exit 2; }
    echo "$site=$i $delay $bloss $hosts $hloss" >>"$STATE/sites"
    in_core ip link add qb$i type bridge mcast_snooping 0
    in_core ip link set qb$i up
    if [[ $sites -gt 1 ]]; then
      # Backbone side: u$i (relay) <-> u${i}p (port of qb0); site side: d$i (relay) <-> d${i}p (port of qb$i).
      in_core ip link add u$i type veth peer name u${i}p
      in_core ip link add d$i type veth peer name d${i}p
      in_core ip link set u${i}p master qb0
      in_core ip link set d${i}p master qb$i
      for dev in u$i u${i}p d$i d${i}p; do offloads_off "$CORE" $dev; in_core ip link set $dev up; done
      relay_args+=(--link "u$i,d$i,$delay")
    fi
    if [[ $bloss -gt 0 && $sites -gt 1 ]]; then
      in_core nft add table bridge qswan 2>/dev/null || true
      in_core nft add chain bridge qswan sitein '{ type filter hook forward priority 0; }' 2>/dev/null || true
      in_core nft add rule bridge qswan sitein oifname "u${i}p" numgen random mod 100 "<" "$bloss" counter drop
    fi
    for h in $(seq 1 "$hosts"); do
      local ns=$PREFIX-$site$h
      ip netns add "$ns"
      ip -n "$ns" link set lo up
      in_core ip link add h${i}x$h type veth peer name eth0 netns "$ns"
      in_core ip link set h${i}x$h master qb$i
      offloads_off "$CORE" h${i}x$h; offloads_off "$ns" eth0
      in_core ip link set h${i}x$h up
      ip -n "$ns" addr add 10.77.$i.$h/16 dev eth0
      ip -n "$ns" link set eth0 up
      ip -n "$ns" route add 224.0.0.0/4 dev eth0
      [[ $hloss -gt 0 ]] && host_loss "$ns" "$hloss"
    done
  done
  if [[ $sites -eq 1 ]]; then
    echo "qs-wanlink: not started (one site)" >"$STATE/relay.log"
    return 0
  fi
  ip netns exec "$CORE" nice -n 5 "$WANLINK" "${relay_args[@]}" --seconds "$RELAY_SECONDS" >"$STATE/relay.log" 2>&1 &
  echo $! >"$STATE/relay.pid"
  for _ in $(seq 100); do grep -q '^qs-wanlink:' "$STATE/relay.log" 2>/dev/null && break; sleep 0.1; done
  grep -q '^qs-wanlink: [a-z]' "$STATE/relay.log" || { echo "testbed: the relay did not start: $(cat "$STATE/relay.log")" >&2; down; exit 1; }
}

host_ns() { [[ -n $(site_index "$1") ]] || { echo "testbed: no site '$1'" >&2; exit 2; }; echo "$PREFIX-$1$2"; }

case ${1:-} in
  up) shift; up "$@" ;;
  down) down ;;
  check) check ;;
  ns) host_ns "$2" "$3" ;;
  ip) i=$(site_index "$2"); [[ -n $i ]] || { echo "testbed: no site '$2'" >&2; exit 2; }; echo "10.77.$i.$3" ;;
  rate) ns=$(host_ns "$2" "$3"); tc -n "$ns" qdisc replace dev eth0 root tbf rate "$4" burst 3000 limit "$5" ;;
  uplink-rate)
    i=$(site_index "$2"); [[ -n $i ]] || { echo "testbed: no site '$2'" >&2; exit 2; }
    # down: what enters the site (the relay's egress toward the site bridge); up: what leaves it toward the backbone.
    [[ $(wc -l <"$STATE/sites") -gt 1 ]] || { echo "testbed: a one-site testbed has no uplink" >&2; exit 2; }
    case ${5:-down} in down) dev=d$i ;; up) dev=u$i ;; *) echo "testbed: uplink-rate direction must be up or down" >&2; exit 2 ;; esac
    tc -n "$CORE" qdisc replace dev $dev root tbf rate "$3" burst 3000 limit "$4" ;;
  stats) tc -n "$CORE" -s qdisc show ;;
  loss) [[ ${4:-} =~ ^[0-9]+$ && $4 -le 100 ]] || { echo "testbed: loss PCT must be 0..100" >&2; exit 2; }; host_loss "$(host_ns "$2" "$3")" "$4" ;;
  relay-log) cat "$STATE/relay.log" ;;
  *) sed -n '2,9p' "$0"; exit 2 ;;
esac
