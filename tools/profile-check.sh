#!/usr/bin/env bash
# Checks `convlab run ... --profile` on a GPU machine: runs the two profiled commands of the
# course (m1.3 and the final milestone), then times the final run's conv kernels with Nsight
# Compute and compares each kernel's average duration: CUPTI's activity records against ncu's
# gpu__time_duration, which should agree within 10% for kernels longer than 100 us.
#
#   tools/profile-check.sh LOGDIR    (from the repository root, with build/default built)
#
# Environment: CONVLAB (the binary; default build/default/reference/driver/convlab), N (images,
# default 10000), KERNEL_REGEX (ncu's kernel filter, default conv_: the staff kernels are
# conv_<variant>_..._kernel), TOLERANCE (percent, default 10), MIN_US (shortest kernel judged,
# default 100). CONVLAB_DATA is passed on to convlab as usual.
set -uo pipefail
logdir=${1:?usage: tools/profile-check.sh LOGDIR}
mkdir -p "$logdir"
convlab=${CONVLAB:-build/default/reference/driver/convlab}
n=${N:-10000}
regex=${KERNEL_REGEX:-conv_}
tolerance=${TOLERANCE:-10}
min_us=${MIN_US:-100}
failures=0
step() { echo; echo "== $*"; }
fail() { echo "FAIL  $*"; failures=$((failures + 1)); }

[ -x "$convlab" ] || { echo "no convlab at $convlab: build the default preset first"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  command -v ncu >/dev/null && ncu --version | tail -1; } 2>&1 | tee "$logdir/machine.log"

# 1. The two profiled runs; each must end with the table.
step "convlab run m1 baseline $n --device gpu --profile"
"$convlab" run m1 baseline "$n" --device gpu --profile --profile-json "$logdir/m1-profile.json" \
  >"$logdir/m1-profile.txt" 2>&1
echo "exit code $?" | tee -a "$logdir/m1-profile.txt"
sed -n '/Correctness:/,$p' "$logdir/m1-profile.txt" | head -40

step "convlab run final ece408-high $n --impl solution --profile"
"$convlab" run final ece408-high "$n" --impl solution --profile \
  --profile-json "$logdir/final-profile.json" >"$logdir/final-profile.txt" 2>&1
echo "exit code $?" | tee -a "$logdir/final-profile.txt"
sed -n '/Correctness:/,$p' "$logdir/final-profile.txt" | head -40

for run in m1 final; do
  f="$logdir/$run-profile.txt"
  grep -q "== Profiling result:" "$f" || fail "$run: no 'Profiling result' line"
  grep -q "^ GPU activities:  " "$f" || fail "$run: no 'GPU activities:' section"
  grep -q "^      API calls:  " "$f" || fail "$run: no 'API calls:' section"
  grep -q "  \[CUDA memcpy HtoD\]$" "$f" || fail "$run: no [CUDA memcpy HtoD] row"
  grep -q "  \[CUDA memcpy DtoH\]$" "$f" || fail "$run: no [CUDA memcpy DtoH] row"
  grep -q "  cudaMemcpy$" "$f" || fail "$run: no cudaMemcpy row"
  grep -q "^Correctness: " "$f" || fail "$run: no Correctness line"
done
grep -q "  cudaLaunchKernel$" "$logdir/final-profile.txt" || fail "final: no cudaLaunchKernel row"

# 2. ncu on the same final command (no --profile: one CUPTI client per process). Caches and
# clocks are left alone so that the kernels run as they did under --profile.
step "ncu --metrics gpu__time_duration.sum on the final run (kernels matching regex:$regex)"
if ! command -v ncu >/dev/null; then
  fail "ncu is not on the PATH"
else
  ncu --metrics gpu__time_duration.sum --csv --print-units base --print-kernel-base function \
    --cache-control none --clock-control none --kernel-name "regex:$regex" \
    "$convlab" run final ece408-high "$n" --impl solution >"$logdir/ncu.csv" 2>"$logdir/ncu.log"
  echo "ncu exit code $?" | tee -a "$logdir/ncu.log"

  # 3. Side by side: per kernel (ncu's function name), the average of its launches.
  python3 - "$logdir/ncu.csv" "$logdir/final-profile.json" "$tolerance" "$min_us" \
    <<'EOF' | tee "$logdir/compare.txt"
import csv, json, re, sys
ncu_csv, profile_json, tolerance, min_us = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
lines = [l for l in open(ncu_csv) if l.startswith('"')]
if not lines:
    print("NO-DATA: ncu wrote no CSV rows (see ncu.log)")
    sys.exit(1)
ncu = {}  # function name -> durations in ns
for row in csv.DictReader(lines):
    if row.get("Metric Name") != "gpu__time_duration.sum":
        continue
    unit = row.get("Metric Unit", "")
    value = float(row["Metric Value"].replace(",", ""))
    scale = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
             "s": 1e9, "second": 1e9}.get(unit)
    if scale is None:
        print(f"NO-DATA: unexpected unit {unit!r}")
        sys.exit(1)
    # ncu names the function ("conv_best_hold_kernel"); CUPTI the whole demangled signature.
    name = row["Kernel Name"].replace("(anonymous namespace)", "")
    base = re.split(r"[<(]", name)[0].split("::")[-1].split()[-1]
    ncu.setdefault(base, []).append(value * scale)
profile = json.load(open(profile_json))
rows = profile["gpu_activities"]
width = max([6] + [len(k) for k in ncu])
print(f"{'kernel':<{width}}  {'ncu n':>5}  {'ncu avg':>11}  {'cupti n':>7}  {'cupti avg':>11}  {'diff':>7}  verdict")
bad = 0
for base, durations in sorted(ncu.items()):
    pattern = re.compile(r"(^|[\s:])" + re.escape(base) + r"[<(]")
    matched = [r for r in rows if pattern.search(r["name"])]
    ncu_avg = sum(durations) / len(durations)
    if not matched:
        print(f"{base:<{width}}  {len(durations):>5}  {ncu_avg / 1e3:>9.2f}us  {'-':>7}  {'-':>11}  {'-':>7}  MISSING in the --profile table")
        bad += 1
        continue
    calls = sum(r["calls"] for r in matched)
    cupti_avg = sum(r["time_s"] for r in matched) * 1e9 / calls
    diff = 100.0 * (cupti_avg - ncu_avg) / ncu_avg
    if ncu_avg < min_us * 1e3:
        verdict = f"not judged (under {min_us:g} us)"
    elif abs(diff) <= tolerance:
        verdict = f"agree (within {tolerance:g}%)"
    else:
        verdict = f"DISAGREE (over {tolerance:g}%)"
        bad += 1
    if calls != len(durations):
        verdict += "; launch counts differ"
    print(f"{base:<{width}}  {len(durations):>5}  {ncu_avg / 1e3:>9.2f}us  {calls:>7}  {cupti_avg / 1e3:>9.2f}us  {diff:>+6.1f}%  {verdict}")
sys.exit(1 if bad else 0)
EOF
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "CUPTI and ncu kernel durations (see compare.txt)"

  # 4. Under ncu, --profile cannot attach a second CUPTI client: one clear error expected.
  step "--profile under ncu (one clear error expected, not a crash)"
  ncu --kernel-name "regex:$regex" --metrics gpu__time_duration.sum "$convlab" run final \
    ece408-high 100 --impl solution --profile >"$logdir/ncu-and-profile.log" 2>&1
  code=$?
  grep -E "convlab: (error|internal error)" "$logdir/ncu-and-profile.log" | head -3
  grep -q "Profiling result" "$logdir/ncu-and-profile.log" &&
    echo "(both ran: this CUPTI allows a second client)"
  echo "exit code $code"
  [ "$code" -lt 128 ] || fail "--profile under ncu crashed (exit $code)"
fi

echo
echo "profile-check: $failures failure(s); logs in $logdir"
exit $((failures > 0))
