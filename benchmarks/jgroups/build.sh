#!/usr/bin/env bash
# Builds the JGroups side of the comparison: installs Debian's libjgroups-java (and a JDK when javac is missing)
# with apt-get, then compiles src/*.java into build/ (git-ignored). Prints the classpath on its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
jar=/usr/share/java/jgroups.jar

export DEBIAN_FRONTEND=noninteractive
sudo=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
  sudo="sudo -n"
fi

apt_install() {
  if ! $sudo apt-get install -y --no-install-recommends "$@"; then
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends "$@"
  fi
}

if ! command -v javac >/dev/null 2>&1; then
  apt_install default-jdk-headless
fi
if [ ! -f "$jar" ]; then
  apt_install libjgroups-java
fi

mkdir -p "$here/build"
javac -nowarn -cp "$jar" -d "$here/build" "$here"/src/*.java
echo "$here/build:$jar"
