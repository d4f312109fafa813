#!/usr/bin/env bash
# Stack v2 (issue 10): end-to-end cost per message before and after, back to back on this machine.
#
# Builds the pathcost program (benchmarks/QuickSilver.Benchmarks/PathCost.cs: two nodes in one process over loopback,
# public API only) against two source trees with the same small wrapper project, then runs them in turn, BEFORE then
# AFTER, pair after pair, for each message size. It prints every run's line, then per size the median of each figure
# and the after/before ratio (the median of the pair-by-pair ratios: pairing keeps the ratio meaningful when the
# machine's speed drifts). Every run is bounded (pathcost's own --timeout, and a kill 60 s after it), and the number
# of runs is 2 x pairs x sizes, so the script stops by itself.
#
# usage: benchmarks/pathcost-before-after.sh [--before REF|DIR] [--after REF|DIR] [--sizes "100 1000"]
#            [--messages auto|N] [--warmup-seconds 20] [--token-interval-ms MS] [--pairs 3] [--timeout 180] [--work DIR]
#   --before   a git ref of this repository (exported with git archive into the work directory) or a directory
#              holding a checkout (e.g. a worktree). Default: 8029bfc, main before Stack v2.
#   --after    the same; default: this checkout's working tree (uncommitted changes included).
#   --messages measured messages per run; auto (the default): 600,000,000 / size, within 600,000..6,000,000 (so a
#              run spans several token rounds: at 100 B one sender window alone holds about 585,000 messages).
#   --warmup-seconds  publishing before the measurement (rate control's ramp; see PathCost.cs).
#   --token-interval-ms  both nodes' region token interval (default: the library's, 1 s). With the default, a
#              sender on loopback is bound to about one window (4,096 packets) per round, before and after alike, so
#              msgs/s is the same by construction; 100 makes the runs CPU-bound instead.
#   --timeout  seconds one run may take (start-up, warm-up and measurement).
#   --work     scratch directory for the exported tree, the wrapper projects and their builds.
#              Default: ${TMPDIR:-/tmp}/quicksilver-pathcost.
# Examples (12 runs of about 30 s each, some 6-7 minutes per call):
#   benchmarks/pathcost-before-after.sh --before 8029bfc --sizes "100 1000" --pairs 3
#   benchmarks/pathcost-before-after.sh --before 8029bfc --sizes "100 1000" --pairs 3 --token-interval-ms 100
set -euo pipefail

script_dir=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$script_dir/.." && pwd)
source_file="$script_dir/QuickSilver.Benchmarks/PathCost.cs"

before=8029bfc
after=$repo
sizes="100 1000"
messages=auto
warmup_seconds=20
token_args=()
pairs=3
timeout_s=180
work=${TMPDIR:-/tmp}/quicksilver-pathcost

while [ $# -gt 0 ]; do
  case "$1" in
    --before) before=$2; shift 2 ;;
    --after) after=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --messages) messages=$2; shift 2 ;;
    --warmup-seconds) warmup_seconds=$2; shift 2 ;;
    --token-interval-ms) token_args=(--token-interval-ms "$2"); shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print } /^set / { exit }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

case "$pairs" in ''|*[!0-9]*) echo "--pairs must be a number" >&2; exit 2 ;; esac
[ "$pairs" -ge 1 ] && [ "$pairs" -le 50 ] || { echo "--pairs must be 1..50" >&2; exit 2; }
mkdir -p "$work"

# A directory is used as it is; anything else is a ref of this repository, exported once into the work directory.
tree_of() {
  local spec=$1 name=$2
  if [ -d "$spec" ]; then
    (cd "$spec" && pwd)
    return
  fi
  local commit
  commit=$(git -C "$repo" rev-parse --verify --quiet "$spec^{commit}") || { echo "not a directory or a commit: $spec" >&2; exit 2; }
  local dir="$work/tree-$name-${commit:0:12}"
  if [ ! -f "$dir/.exported" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    git -C "$repo" archive --format=tar "$commit" | tar -x -C "$dir"
    touch "$dir/.exported"
  fi
  echo "$dir"
}

# The same wrapper for both trees: pathcost's source from this checkout, the tree's public library.
build() {
  local name=$1 tree=$2
  local dir="$work/run-$name"
  [ -f "$tree/src/QuickSilver/QuickSilver.csproj" ] || { echo "$tree has no src/QuickSilver/QuickSilver.csproj" >&2; exit 2; }
  rm -rf "$dir" && mkdir -p "$dir"
  cat > "$dir/PathCostRun.csproj" <<EOF
<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup>
    <OutputType>Exe</OutputType>
    <TargetFramework>net10.0</TargetFramework>
    <LangVersion>latest</LangVersion>
    <Nullable>enable</Nullable>
    <ImplicitUsings>enable</ImplicitUsings>
    <Optimize>true</Optimize>
    <NoWarn>\$(NoWarn);NU1603</NoWarn>
  </PropertyGroup>
  <ItemGroup>
    <Compile Include="$source_file" Link="PathCost.cs" />
    <ProjectReference Include="$tree/src/QuickSilver/QuickSilver.csproj" />
  </ItemGroup>
</Project>
EOF
  cat > "$dir/Program.cs" <<'EOF'
return await QuickSilver.Benchmarks.PathCost.RunAsync(args);
EOF
  echo "== building $name: $tree" >&2
  if ! dotnet build "$dir/PathCostRun.csproj" -c Release -o "$dir/bin" -nologo -v quiet > "$dir/build.log" 2>&1; then
    tail -n 30 "$dir/build.log" >&2
    echo "build of $name failed (log: $dir/build.log)" >&2
    exit 1
  fi
}

before_tree=$(tree_of "$before" before)
after_tree=$(tree_of "$after" after)
build before "$before_tree"
build after "$after_tree"

results="$work/results.txt"
: > "$results"
echo "== before: $before ($before_tree)"
echo "== after:  $after ($after_tree)"
echo "== $pairs pairs per size, sizes: $sizes, messages per run: $messages, warm-up ${warmup_seconds} s ${token_args[*]:-}; figures cover sender and receiver (both nodes in one process)"
for size in $sizes; do
  n=$messages
  if [ "$n" = auto ]; then
    n=$((600000000 / size))
    [ "$n" -lt 600000 ] && n=600000
    [ "$n" -gt 6000000 ] && n=6000000
  fi
  for pair in $(seq 1 "$pairs"); do
    for side in before after; do
      line=$(timeout --kill-after=10 $((timeout_s + 60)) dotnet "$work/run-$side/bin/PathCostRun.dll" \
               --size "$size" --messages "$n" --warmup-seconds "$warmup_seconds" --timeout "$timeout_s" "${token_args[@]}" \
               2>"$work/run-$side/stderr.txt" | grep '^pathcost ' || true)
      if [ -z "$line" ]; then
        line="pathcost FAILED size=$size ($(tr '\n' ' ' < "$work/run-$side/stderr.txt" | cut -c1-200))"
      fi
      echo "$side pair=$pair $line" | tee -a "$results"
    done
  done
done

echo
echo "== medians (per size) and after/before ratios (median of the pair-by-pair ratios)"
awk '
  function field(name,   i, kv) {
    for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == name) return kv[2] }
    return ""
  }
  function median(list, n,   sorted, i, j, t) {
    for (i = 1; i <= n; i++) sorted[i] = list[i]
    for (i = 2; i <= n; i++) { t = sorted[i]; for (j = i - 1; j >= 1 && sorted[j] > t; j--) sorted[j + 1] = sorted[j]; sorted[j + 1] = t }
    if (n == 0) return "n/a"
    return fmt((n % 2) ? sorted[(n + 1) / 2] : (sorted[n / 2] + sorted[n / 2 + 1]) / 2)
  }
  function fmt(x) {
    return (x >= 1000) ? sprintf("%.0f", x) : (x >= 1) ? sprintf("%.3f", x) : sprintf("%.3g", x)
  }
  $3 == "pathcost" && $4 != "FAILED" {
    side = $1; split($2, p, "="); pair = p[2]; size = field("size")
    if (!(size in seen)) { seen[size] = 1; order[++nsizes] = size }
    for (k = 1; k <= 3; k++) {
      name = (k == 1) ? "msgs_per_s" : (k == 2) ? "alloc_bytes_per_msg" : "cpu_us_per_msg"
      value[side, size, pair, name] = field(name)
    }
    have[side, size, pair] = 1
  }
  END {
    printf "%-6s %-20s %14s %14s %14s %8s\n", "size", "figure", "before", "after", "after/before", "pairs"
    for (s = 1; s <= nsizes; s++) {
      size = order[s]
      for (k = 1; k <= 3; k++) {
        name = (k == 1) ? "msgs_per_s" : (k == 2) ? "alloc_bytes_per_msg" : "cpu_us_per_msg"
        nb = na = nr = 0
        delete b; delete a; delete r
        for (pair = 1; pair <= 50; pair++) {
          if (have["before", size, pair]) b[++nb] = value["before", size, pair, name] + 0
          if (have["after", size, pair]) a[++na] = value["after", size, pair, name] + 0
          if (have["before", size, pair] && have["after", size, pair] && value["before", size, pair, name] + 0 != 0)
            r[++nr] = (value["after", size, pair, name] + 0) / (value["before", size, pair, name] + 0)
        }
        printf "%-6s %-20s %14s %14s %14s %8d\n", size, name, median(b, nb), median(a, na), median(r, nr), nr
      }
    }
  }' "$results"
echo "(runs: $results)"
