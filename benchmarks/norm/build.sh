#!/usr/bin/env bash
# Builds the NORM side of the AER/NORM comparison (docs/aer.md, "NORM comparison"): norm-send and norm-recv, small C
# programs against NRL's NORM library (Debian libnorm-dev, installed by tools/wan/install-deps.sh or here with
# apt-get when missing), compiled with gcc -Wall -Werror into build/ (git-ignored). Prints the build directory on
# its last line.
#
# Debian's normApi.h is meant for C++: two declarations use a C++ reference and a default argument. The build
# copies the header into build/include with those two lines rewritten as C (a pointer has the same ABI as a
# reference; the harness calls neither function) and compiles against the copy, as a system header (-isystem: its
# own attribute warnings are not the harness's).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
header=/usr/include/normApi.h

if [ ! -f "$header" ] || ! command -v gcc >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  sudo=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; fi
  if ! $sudo apt-get install -y --no-install-recommends libnorm-dev gcc; then
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends libnorm-dev gcc
  fi
fi

out=${NORM_BUILD_DIR:-$here/build}
mkdir -p "$out/include"
sed -e 's/unsigned int& addrLen, UINT16& port/unsigned int* addrLen, UINT16* port/' \
    -e 's/unsigned int bytesWanted = 0)/unsigned int bytesWanted)/' "$header" >"$out/include/normApi.h"
cflags=(-std=c11 -O2 -Wall -Wextra -Werror -isystem "$out/include")
for tool in send recv; do
  gcc "${cflags[@]}" -o "$out/norm-$tool" "$here/src/norm_$tool.c" "$here/src/delay_stats.c" "$here/src/cli.c" "$here/src/norm_session.c" -lnorm
done
echo "$out"
