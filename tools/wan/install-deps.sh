#!/usr/bin/env bash
# Installs the Debian packages the wide-area testbed uses (docs/testbed.md). Run once, as root, before the
# testbed scripts; NamespaceAerTests runs it itself when it finds the tools missing (as root), so the README's test
# command sets up a fresh machine; the benchmark scripts never install anything themselves.
set -euo pipefail
if [[ $(id -u) -ne 0 ]]; then echo "install-deps.sh: must run as root (apt-get)" >&2; exit 2; fi
export DEBIAN_FRONTEND=noninteractive
timeout 300 apt-get update -q
timeout 600 apt-get install -y -q --no-install-recommends nftables iperf3 iproute2 iputils-ping ethtool udpcast uftp libnorm-dev gcc make
