#!/usr/bin/env bash
# Validates convlab on a GPU machine in one go: builds the default preset, runs every test
# suite (GPU ones included), runs compute-sanitizer over every GPU variant and the cuDNN path,
# checks the expected correctness of every milestone, and benchmarks. Logs go to LOGDIR.
#
#   tools/gpu-check.sh LOGDIR [STAGE...]
#
# Stages, in order: build test correct sanitize bench layers profile grade (default: all).
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: tools/gpu-check.sh LOGDIR [build] [test] [correct] [sanitize] [bench] [layers] [profile] [grade]}
shift
stages=${*:-build test correct sanitize bench layers profile grade}
mkdir -p "$logdir"
convlab=build/default/reference/driver/convlab
failures=0
step() { echo; echo "== $*"; }
want() { [[ " $stages " == *" $1 "* ]]; }
check() {  # check NAME COMMAND...: runs (at most CHECK_TIMEOUT seconds), logs, counts failures
  local name=$1; shift
  if timeout "${CHECK_TIMEOUT:-600}" "$@" >"$logdir/$name.log" 2>&1; then echo "ok    $name"; else echo "FAIL  $name (see $name.log)"; failures=$((failures + 1)); fi
}

step "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; nvcc --version | tail -1;
  cmake --version | head -1; nproc; } 2>&1 | tee "$logdir/machine.log"

if want build; then
step "build (preset default)"
check build bash -c "cmake --preset default && cmake --build --preset default"
fi
[ -x "$convlab" ] || { echo "no build"; tail -30 "$logdir/build.log"; exit 1; }

if want test; then
step "tests"
check ctest ctest --preset default -j4
grep -E "tests passed|Skipped|Failed|\*\*\*" "$logdir/ctest.log"
grep -h "^SKIPPED:" build/default/Testing/Temporary/LastTest.log
fi

if want correct; then
step "expected correctness, staff solutions, 10000 images"
for model in ece408-high ece408-low; do
  check "m2-$model" "$convlab" run m2 "$model" 10000 --impl solution
  check "m3-$model" "$convlab" run m3 "$model" 10000 --impl solution
  check "final-$model" "$convlab" run final "$model" 10000 --impl solution --variant all --runs 5 \
    --json "$logdir/final-$model.json"
done
check check-m3 "$convlab" check m3 --impl solution --seed 1
check check-final "$convlab" check final --variant all --impl solution --seed 1
check m1-cpu "$convlab" run m1 baseline 10000 --device cpu
check m1-gpu "$convlab" run m1 baseline 10000 --device gpu
check final-two-conv "$convlab" run final two-conv 10000 --impl solution --variant all
grep -h -E "Correctness|WRONG|error" "$logdir"/m*.log "$logdir"/final-*.log | sort | uniq -c
fi

if want sanitize; then
step "compute-sanitizer: memcheck, racecheck and initcheck on every variant"
n=1000
export CHECK_TIMEOUT=90
check sanitize-cudnn compute-sanitizer --tool memcheck --error-exitcode 9 "$convlab" run m1 baseline "$n" --device gpu
# Every GPU variant of the declarations (reference/conv/variants.def): "id milestone fused|unfused".
sed -n 's/^CONVLAB_VARIANT(\([a-z0-9_]*\), \([a-z0-9_]*\), gpu, .*, \([a-z]*\))$/\1 \2 \3/p' \
  reference/conv/variants.def > "$logdir/gpu-variants.txt"
while read -r v ms fused; do
  if [ "$fused" = fused ]; then
    check "memcheck-$v-unfused" compute-sanitizer --tool memcheck --error-exitcode 9 "$convlab" run "$ms" ece408-high "$n" --impl solution --variant "$v" --no-fuse
  fi
  check "memcheck-$v" compute-sanitizer --tool memcheck --error-exitcode 9 "$convlab" run "$ms" ece408-high "$n" --impl solution --variant "$v"
  check "memcheck2-$v" compute-sanitizer --tool memcheck --error-exitcode 9 "$convlab" run "$ms" two-conv 100 --impl solution --variant "$v"
  check "racecheck-$v" compute-sanitizer --tool racecheck --error-exitcode 9 "$convlab" run "$ms" ece408-high 100 --impl solution --variant "$v"
  check "initcheck-$v" compute-sanitizer --tool initcheck --error-exitcode 9 "$convlab" run "$ms" ece408-high 100 --impl solution --variant "$v"
done < "$logdir/gpu-variants.txt"
grep -h "ERROR SUMMARY" "$logdir"/*check*-*.log "$logdir"/sanitize-*.log | sort | uniq -c
unset CHECK_TIMEOUT
fi

if want bench; then
step "benchmarks"
# End-to-end wall time of the main job, five times.
for i in 1 2 3 4 5; do
  /usr/bin/time -f "%e" -o "$logdir/wall.$i" "$convlab" run final ece408-high 10000 --impl solution >/dev/null 2>&1
done
echo "convlab run final ece408-high 10000 wall seconds: $(cat "$logdir"/wall.* | sort -n | tr '\n' ' ')" | tee "$logdir/bench.log"
# CPU reference network (m1.1) restricted to 2 cores.
for i in 1 2 3; do
  /usr/bin/time -f "%e" -o "$logdir/cpu.$i" taskset -c 0,1 "$convlab" run m1 baseline 10000 --device cpu >/dev/null 2>&1
done
echo "convlab run m1 baseline 10000 --device cpu (2 cores) wall seconds: $(cat "$logdir"/cpu.* | sort -n | tr '\n' ' ')" | tee -a "$logdir/bench.log"
# Op Time of every variant next to cuDNN's, same run: warm-up, 20 timed calls, min and median.
"$convlab" run final ece408-high 10000 --impl solution --variant all --runs 20 --json "$logdir/bench-variants.json" | tee -a "$logdir/bench.log"
rm -f "$logdir"/wall.* "$logdir"/cpu.*
fi

if want layers; then
step "layer benchmark: every net, every variant, cuDNN's fastest fp32 algorithm"
mkdir -p "$logdir/layers"
for net in ece408 two-conv lenet vgg16 odd-shapes random-layers; do
  check "layers-$net" "$convlab" bench --net "$net" --variant all --impl solution --json "$logdir/layers/$net.json"
  cp "$logdir/layers-$net.log" "$logdir/layers/$net.txt"
done
check layers-ece408-warm "$convlab" bench --net ece408 --variant all --impl solution --no-flush
fi

if want profile; then
step "--profile (CUPTI) on m1.2 and final, checked against Nsight Compute"
check profile tools/profile-check.sh "$logdir/profile"
fi

if want grade; then
step "convlab grade: the staff solutions of m2, m3 and final, in the sandbox, on this GPU"
grade_root=$(mktemp -d)
for ms in m2 m3 final; do
  # The staff files, handed in as a team would: the same code in namespace convlab::student.
  while read -r f; do
    dest="$grade_root/staff-$ms/student/${f#reference/solutions/}"
    mkdir -p "$(dirname "$dest")"
    sed 's/convlab::solution/convlab::student/g' "$f" >"$dest"
  done < <(find reference/solutions -name '*.cpp' -o -name '*.cu')
  start=$SECONDS
  check "grade-$ms" "$convlab" grade "$grade_root/staff-$ms" --milestone "$ms" --team "staff-$ms" \
    --out "$logdir/grade-$ms" --cache "$grade_root/cache"
  echo "grade $ms: $((SECONDS - start)) s (framework cache built on the first)" | tee -a "$logdir/grade-times.log"
done
rm -rf "$grade_root"
fi

echo
echo "gpu-check: $failures failure(s)"
exit $((failures > 0))
