#!/usr/bin/env bash
# Regenerates the measured part of docs/performance.md: the bench reports of the staff
# solutions on every network description (docs/perf/bench-NET.json, with the printed tables in
# docs/perf/bench-NET.txt), the roofline plot the page shows and the page's tables, both drawn
# from those reports (docs/perf/roofline.svg, docs/perf/tables.md, which replaces the page's
# text between its "bench tables" markers).
#
#   tools/performance-page.sh           on a GPU machine: measure every net, then draw the plot
#   tools/performance-page.sh --draw    anywhere: draw the plot and tables from docs/perf's reports
set -euo pipefail
cd "$(dirname "$0")/.."

preset=$(tools/preset.sh)
convlab="build/$preset/reference/driver/convlab"
if [ ! -x "$convlab" ]; then
  echo "build convlab first: cmake --preset $preset && cmake --build --preset $preset --target convlab" >&2
  exit 1
fi
out=docs/perf
case "${1:-}" in
  --draw) ;;
  "")
    rm -f "$out"/bench-*.json "$out"/bench-*.txt
    for net in ece408 two-conv lenet vgg16 odd-shapes; do
      echo "== convlab bench --net $net"
      "$convlab" bench --net "$net" --variant all --impl solution --json "$out/bench-$net.json" \
        | tee "$out/bench-$net.txt"
    done
    ;;
  *)
    echo "usage: tools/performance-page.sh [--draw]" >&2
    exit 1
    ;;
esac
# The reports in name order: the order the plot's title lists the nets in.
"$convlab" bench --from-json "$out"/bench-*.json --svg "$out/roofline.svg" \
  --markdown "$out/tables.md"
# The page's measured tables are that file, between the page's two markers.
page=docs/performance.md
awk -v tables="$out/tables.md" '
  /^<!-- bench tables: begin/ { print; while ((getline line < tables) > 0) print line; skip = 1; next }
  /^<!-- bench tables: end/ { skip = 0 }
  !skip { print }' "$page" >"$page.new"
mv "$page.new" "$page"
echo "updated $page"
