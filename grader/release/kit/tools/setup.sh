#!/usr/bin/env bash
# convlab starter kit: installs the Debian/Ubuntu packages a team needs, builds what this machine
# can run, and runs milestone m1 (the library convolution): on the GPU where there is one, else
# on the CPU. Without a usable GPU it builds the cpu preset (m1 on the CPU, m2) even where the
# CUDA toolkit is installed, and says how to build the GPU milestones on the course's machine.
#
#   tools/setup.sh                           (as root, or with sudo available)
#   CONVLAB_PRESET=default tools/setup.sh    build the CUDA preset whatever this machine has
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
# libcpp-httplib-dev: HTTP for `convlab submit` (the course's GPUs); binutils: nm, which
# `convlab grade` uses to check your code's symbols; ccache: rebuilds (and
# the framework copy each local grade builds) reuse what was compiled before.
packages=(cmake ninja-build g++ pkg-config binutils ccache zlib1g-dev nlohmann-json3-dev
          libcli11-dev doctest-dev libcpp-httplib-dev dataset-fashion-mnist)
echo "== installing packages: ${packages[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}"

preset=$(tools/preset.sh --runnable)
if [ "$preset" = cpu ]; then
  if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    echo "== the CUDA toolkit is here but no usable GPU (nvidia-smi -L fails): building the cpu"
    echo "   preset, what this machine can run (m1 on the CPU, m2). On the course's GPU machine,"
    echo "   build m3 and final with: CONVLAB_PRESET=default tools/setup.sh"
    echo "   (or: cmake --preset default && cmake --build --preset default)"
  else
    echo "== no CUDA toolkit here: building the cpu preset (m1 on the CPU, m2). m3 and final"
    echo "   need the course's GPU machine: there, run CONVLAB_PRESET=default tools/setup.sh"
  fi
fi
# A first build of convlab in core-minutes (the CUDA preset compiles every kernel for this
# machine's GPU as well), for the estimate; ccache makes a rebuild much shorter.
cores=$(nproc 2>/dev/null || echo 1)
if [ "$preset" = cpu ]; then work=8; else work=16; fi
minutes=$(( (work + cores - 1) / cores ))
echo "== building with preset '$preset' on $cores cores: about $minutes minute(s) for a first build"
cmake --preset "$preset"
# The command only: tools/test.sh builds the test suites when they are wanted.
cmake --build --preset "$preset" --target convlab

convlab="build/$preset/reference/driver/convlab"
if [ "$preset" = default ] && nvidia-smi -L >/dev/null 2>&1; then
  echo "== convlab run m1 baseline 10000 --device gpu"
  "$convlab" run m1 baseline 10000 --device gpu
else
  echo "== convlab run m1 baseline 10000 --device cpu"
  "$convlab" run m1 baseline 10000 --device cpu
fi
echo "== ready: read milestones/m1/README.md, then write student/m2/conv_cpu.cpp (milestones/m2/README.md)"
