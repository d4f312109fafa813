#!/usr/bin/env bash
# Coverage-guided fuzzing of one QuickSilver decoder family for N minutes (docs/fuzzing.md):
#   tools/fuzz.sh <target> [minutes]      e.g. tools/fuzz.sh region-wire 5
#   tools/fuzz.sh list
# Installs what it needs (afl++ from Debian's packages, the SharpFuzz instrumentation tool from the tool manifest in
# tools/.config), publishes tools/QuickSilver.Fuzz, instruments the QuickSilver assemblies with SharpFuzz, and runs
# afl-fuzz on the target for the given minutes (it stops by itself: afl-fuzz -V, and a hard timeout behind it). Then it
# replays every crash and hang afl-fuzz saved against an uninstrumented build and prints the result. Output goes to
# artifacts/fuzz/<target>/ (findings/default/crashes and hangs are the inputs to turn into regression tests).
# Exit status: 0 when nothing was found, 1 when afl-fuzz saved a crash or a hang, 2 on a usage or set-up error.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

target=${1:-}
minutes=${2:-5}
if [[ -z "$target" || "$target" == "-h" || "$target" == "--help" ]]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
if ! [[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]] || awk "BEGIN{exit !($minutes <= 0 || $minutes > 720)}"; then
  echo "fuzz.sh: minutes must be a number in (0, 720], got '$minutes'" >&2
  exit 2
fi
seconds=$(awk "BEGIN{printf \"%d\", $minutes * 60}")

# 1. What it needs: afl-fuzz (Debian's afl++) and the SharpFuzz command-line tool (dotnet tool manifest).
if ! command -v afl-fuzz >/dev/null; then
  echo "== installing afl++ (Debian package)"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends afl++ >/dev/null
fi
(cd tools && dotnet tool restore >/dev/null)

out="$root/artifacts/fuzz/$target"
plain="$root/artifacts/fuzz/plain"
mkdir -p "$out"

# 2. An uninstrumented build (target list, seeds, replays) and an instrumented copy (what afl-fuzz runs).
echo "== building tools/QuickSilver.Fuzz"
nice -n 10 dotnet publish tools/QuickSilver.Fuzz -c Release -o "$plain" -v quiet -nologo >/dev/null
if [[ "$target" == "list" ]]; then
  dotnet "$plain/QuickSilver.Fuzz.dll" list
  exit 0
fi
if ! dotnet "$plain/QuickSilver.Fuzz.dll" list | awk '{print $1}' | grep -qx "$target"; then
  echo "fuzz.sh: unknown target '$target'; one of:" >&2
  dotnet "$plain/QuickSilver.Fuzz.dll" list >&2
  exit 2
fi

rm -rf "$out/bin" "$out/seeds"
cp -r "$plain" "$out/bin"
echo "== instrumenting the QuickSilver assemblies (SharpFuzz)"
assemblies="QuickSilver.Core QuickSilver.Transport QuickSilver.Membership QuickSilver.Qsm"
case "$target" in
  gms|header) assemblies="$assemblies MessagePack" ;; # these decoders are MessagePack underneath: guide the fuzzer through it too
esac
for assembly in $assemblies; do
  (cd tools && dotnet sharpfuzz "$out/bin/$assembly.dll" >/dev/null)
done
dotnet "$plain/QuickSilver.Fuzz.dll" seeds "$target" "$out/seeds"

# 3. Fuzz, bounded in time. A previous run's findings are kept beside this one's.
if [[ -d "$out/findings" ]]; then
  mv "$out/findings" "$out/findings.$(date +%Y%m%d-%H%M%S)"
fi
echo "== afl-fuzz on '$target' for $minutes minute(s)"
export AFL_SKIP_BIN_CHECK=1 AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1
export AFL_FORKSRV_INIT_TMOUT=60000 DOTNET_TieredPGO=0
set +e
timeout --kill-after=30 $((seconds + 120)) nice -n 10 afl-fuzz -i "$out/seeds" -o "$out/findings" -V "$seconds" -t 5000 -m none \
  -- dotnet "$out/bin/QuickSilver.Fuzz.dll" run "$target" >"$out/afl.log" 2>&1
status=$?
set -e
if [[ ! -f "$out/findings/default/fuzzer_stats" ]]; then
  echo "fuzz.sh: afl-fuzz did not start (exit $status); the end of $out/afl.log:" >&2
  tail -n 30 "$out/afl.log" >&2
  exit 2
fi

# 4. What it found.
stats="$out/findings/default/fuzzer_stats"
stat() { awk -F' *: *' -v k="$1" '$1 == k {print $2}' "$stats"; }
echo "== $target: $(stat execs_done) executions ($(stat execs_per_sec)/s), corpus $(stat corpus_count), edges $(stat edges_found), crashes $(stat saved_crashes), hangs $(stat saved_hangs)"
found=0
for kind in crashes hangs; do
  shopt -s nullglob
  files=("$out/findings/default/$kind"/id*)
  shopt -u nullglob
  if (( ${#files[@]} > 0 )); then
    found=1
    echo "== replaying ${#files[@]} saved $kind (uninstrumented)"
    timeout 600 dotnet "$plain/QuickSilver.Fuzz.dll" replay "$target" "${files[@]}" || true
  fi
done
exit $found
