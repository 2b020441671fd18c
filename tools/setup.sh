#!/usr/bin/env bash
# convlab quick start: installs the Debian/Ubuntu packages convlab needs, builds it, and runs
# the main job: the final milestone with the staff solution on a GPU machine, or milestone m2
# (the CPU convolution) where there is no GPU.
#
#   tools/setup.sh            (as root, or with sudo available)
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
packages=(cmake ninja-build g++ pkg-config zlib1g-dev nlohmann-json3-dev libcli11-dev
          doctest-dev libsqlite3-dev doxygen dataset-fashion-mnist)
echo "== installing packages: ${packages[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}"

preset=$(tools/preset.sh)
echo "== building with preset '$preset'"
cmake --preset "$preset"
cmake --build --preset "$preset"

convlab="build/$preset/reference/driver/convlab"
if [ "$preset" = default ] && nvidia-smi -L >/dev/null 2>&1; then
  echo "== convlab run final ece408-high 10000 --impl solution"
  "$convlab" run final ece408-high 10000 --impl solution
else
  echo "== no GPU here: convlab run m2 ece408-high 10000 --impl solution"
  "$convlab" run m2 ece408-high 10000 --impl solution
fi
