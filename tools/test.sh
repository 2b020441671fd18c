#!/usr/bin/env bash
# Builds the test suites (and convlab, if needed) and runs them. GPU suites report "Skipped",
# with the reason, on machines without a usable GPU.
#
#   tools/test.sh             (after tools/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

# The starter kit (no staff solutions) tests what its tools/setup.sh built: code this machine
# can run. The staff tree compiles the CUDA code wherever the toolkit is, as CI does.
if [ -d reference/solutions ]; then preset=$(tools/preset.sh); else preset=$(tools/preset.sh --runnable); fi
[ -f "build/$preset/CMakeCache.txt" ] || cmake --preset "$preset"
cmake --build --preset "$preset"
status=0
ctest --preset "$preset" -j2 || status=$?
# CTest does not show a skipped test's output: print each skip's reason, so none is silent.
grep -h "^SKIPPED:" "build/$preset/Testing/Temporary/LastTest.log" | sort | uniq -c || true
exit "$status"
