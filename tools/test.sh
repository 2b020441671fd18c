#!/usr/bin/env bash
# Builds convlab (if needed) and runs every test suite. GPU suites report "Skipped", with the
# reason, on machines without a usable GPU.
#
#   tools/test.sh             (after tools/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

preset=$(tools/preset.sh)
[ -f "build/$preset/CMakeCache.txt" ] || cmake --preset "$preset"
cmake --build --preset "$preset"
status=0
ctest --preset "$preset" -j2 || status=$?
# CTest does not show a skipped test's output; print the reasons so a skip is never silent.
for t in $(ctest --preset "$preset" -N -L gpu 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: //p'); do
  exe=$(find "build/$preset/tests" -name "$t" -type f -perm -u+x | head -n 1)
  if [ -n "$exe" ]; then
    out=$("$exe" --list-test-cases 2>&1) && rc=0 || rc=$?
    if [ "$rc" -eq 77 ]; then echo "$t: $out"; fi
  fi
done
exit "$status"
