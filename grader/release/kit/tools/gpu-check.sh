#!/usr/bin/env bash
# Checks your GPU work in one go on a machine with an NVIDIA GPU: builds the default preset,
# runs the test suites, compares every variant output by output with the library convolution
# (convlab check), runs m3 and final on the public models, and runs compute-sanitizer's memcheck
# over each variant. Logs go to LOGDIR; each line reads ok or FAIL.
#
#   tools/gpu-check.sh LOGDIR
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: tools/gpu-check.sh LOGDIR}
mkdir -p "$logdir"
convlab=build/default/reference/driver/convlab
failures=0
check() {  # check NAME COMMAND...: runs it (at most 600 s), logs, counts failures
  local name=$1; shift
  if timeout 600 "$@" >"$logdir/$name.log" 2>&1; then echo "ok    $name"; else echo "FAIL  $name (see $logdir/$name.log)"; failures=$((failures + 1)); fi
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || { echo "no GPU here"; exit 1; }
check build bash -c "cmake --preset default && cmake --build --preset default"
[ -x "$convlab" ] || { tail -30 "$logdir/build.log"; exit 1; }
check ctest ctest --preset default
grep -h "^SKIPPED:" build/default/Testing/Temporary/LastTest.log
check m1-gpu "$convlab" run m1 baseline 10000 --device gpu
check check-m3 "$convlab" check m3
check check-final "$convlab" check final --variant all
for model in ece408-high ece408-low two-conv; do
  check "m3-$model" "$convlab" run m3 "$model" 10000
  check "final-$model" "$convlab" run final "$model" 10000 --variant all
done
check memcheck-m3 compute-sanitizer --tool memcheck --error-exitcode 9 "$convlab" run m3 ece408-high 1000
check memcheck-final compute-sanitizer --tool memcheck --error-exitcode 9 "$convlab" run final ece408-high 1000 --variant all
echo "$failures failure(s); logs in $logdir"
[ "$failures" -eq 0 ]
