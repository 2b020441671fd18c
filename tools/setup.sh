#!/usr/bin/env bash
# convlab quick start: installs the Debian/Ubuntu packages convlab needs, builds it, and runs
# the main job: the final milestone with the staff solution on a GPU machine, or milestone m2
# (the CPU convolution) where there is no GPU. In the student starter kit, which has no staff
# solutions, it runs milestone m1 (the library convolution) instead.
#
#   tools/setup.sh            (as root, or with sudo available)
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
# libsqlite3-dev: the grader's results database; chromium: the leaderboard page's rendering test;
# libcpp-httplib-dev: HTTP for `convlab serve` and `convlab submit`; binutils: nm, which the grader
# uses to check a submission's symbols; ccache: every build of this
# tree, of the student kit and of the grader's framework copy reuses what another compiled.
packages=(cmake ninja-build g++ pkg-config binutils ccache zlib1g-dev nlohmann-json3-dev
          libcli11-dev doctest-dev libcpp-httplib-dev libsqlite3-dev doxygen dataset-fashion-mnist chromium)
echo "== installing packages: ${packages[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}"

preset=$(tools/preset.sh)
echo "== building with preset '$preset'"
cmake --preset "$preset"
# The command only: tools/test.sh builds the test suites when they are wanted.
cmake --build --preset "$preset" --target convlab

convlab="build/$preset/reference/driver/convlab"
gpu=no
if [ "$preset" = default ] && nvidia-smi -L >/dev/null 2>&1; then gpu=yes; fi
run() { echo "== convlab run $*"; "$convlab" run "$@"; }
if [ ! -d reference/solutions ]; then
  if [ "$gpu" = yes ]; then run m1 baseline 10000 --device gpu; else run m1 baseline 10000 --device cpu; fi
elif [ "$gpu" = yes ]; then
  run final ece408-high 10000 --impl solution
else
  echo "== no GPU here: the CPU milestone instead"
  run m2 ece408-high 10000 --impl solution
fi
