#!/usr/bin/env bash
# Installs Debian's sockperf (the native raw-UDP baseline of the comparison runner) with apt-get when it is missing.
# Prints the path of the sockperf binary on its last line.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
sudo=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
  sudo="sudo -n"
fi
if ! command -v sockperf >/dev/null 2>&1; then
  if ! $sudo apt-get install -y --no-install-recommends sockperf; then
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends sockperf
  fi
fi
command -v sockperf
