#!/usr/bin/env bash
# Writes the pages of measured figures, one per GPU: docs/perf/GPU.md, drawn from the bench
# reports of the staff solutions on every network description in docs/perf/GPU/ (bench-NET.json,
# with the printed tables in bench-NET.txt), with the roofline plot docs/perf/GPU/roofline.svg.
# The pages are generated only from those files, so the same files give the same pages; a test
# (test_bench_cli) fails when a committed page or plot is not what its reports give.
#
#   tools/performance-page.sh GPU       on a GPU machine: measure every net into docs/perf/GPU/,
#                                       then draw every page (GPU: a short name, e.g. H100)
#   tools/performance-page.sh --draw    anywhere: draw every page from docs/perf's reports
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C  # the reports in byte order, as the test lists them

preset=$(tools/preset.sh)
convlab="build/$preset/reference/driver/convlab"
if [ ! -x "$convlab" ]; then
  echo "build convlab first: cmake --preset $preset && cmake --build --preset $preset --target convlab" >&2
  exit 1
fi
usage="usage: tools/performance-page.sh GPU | --draw"
case "${1:-}" in
  --draw) ;;
  "" | -*)
    echo "$usage" >&2
    exit 1
    ;;
  *)
    gpu=$1
    case "$gpu" in */* | .*)
      echo "GPU is a short name for a folder of docs/perf, e.g. H100: $usage" >&2
      exit 1
      ;;
    esac
    dir="docs/perf/$gpu"
    mkdir -p "$dir"
    rm -f "$dir"/bench-*.json "$dir"/bench-*.txt
    for net in ece408 two-conv lenet vgg16 odd-shapes; do
      echo "== convlab bench --net $net"
      "$convlab" bench --net "$net" --variant all --impl solution --json "$dir/bench-$net.json" \
        | tee "$dir/bench-$net.txt"
    done
    ;;
esac
drawn=0
for dir in docs/perf/*/; do
  dir=${dir%/}
  reports=("$dir"/bench-*.json)
  [ -e "${reports[0]}" ] || continue
  "$convlab" bench --from-json "${reports[@]}" --svg "$dir/roofline.svg" --markdown "$dir.md"
  drawn=$((drawn + 1))
done
if [ "$drawn" -eq 0 ]; then
  echo "no reports in docs/perf/*/: measure first (tools/performance-page.sh GPU on a GPU machine)" >&2
  exit 1
fi
