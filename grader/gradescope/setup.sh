#!/usr/bin/env bash
# Gradescope image setup (runs once, as root, when the autograder zip is uploaded): installs
# the Ubuntu packages convlab needs, builds convlab from the framework in
# $AUTOGRADER_ROOT/source with the cpu preset, and grades the framework's own stubs once so
# that the pristine framework is already built (in $CONVLAB_CACHE) when students submit.
#
#   AUTOGRADER_ROOT  /autograder        CONVLAB_SOURCE  $AUTOGRADER_ROOT/source
#   CONVLAB_CACHE    $AUTOGRADER_ROOT/convlab-cache
set -euo pipefail

root=${AUTOGRADER_ROOT:-/autograder}
source_dir=${CONVLAB_SOURCE:-$root/source}
cache=${CONVLAB_CACHE:-$root/convlab-cache}
cd "$source_dir"

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
packages=(cmake ninja-build g++ pkg-config zlib1g-dev nlohmann-json3-dev libcli11-dev
          libsqlite3-dev coreutils)
echo "== installing packages: ${packages[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}"

# CMakePresets.json version 6 needs CMake 3.25 (Ubuntu 24.04 has 3.28; 22.04 has 3.22).
cmake_version=$(cmake --version | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')
if [ "$(printf '%s\n3.25\n' "$cmake_version" | sort -V | head -1)" != 3.25 ]; then
  echo "setup.sh: CMake $cmake_version is too old (convlab needs 3.25 or later): choose the" \
       "Ubuntu 24.04 base image (or newer) in the autograder settings, then upload again" >&2
  exit 1
fi

echo "== building convlab (preset cpu)"
cmake --preset cpu -DCONVLAB_TESTS=OFF
cmake --build --preset cpu
convlab=$source_dir/build/cpu/reference/driver/convlab

milestone=m2
if [ -f gradescope.env ]; then
  milestone=$(sed -n 's/^CONVLAB_MILESTONE=\([A-Za-z0-9]*\)$/\1/p' gradescope.env | tail -1)
fi
data_args=()
if [ -d data/fashion-mnist ]; then data_args=(--data "$source_dir/data/fashion-mnist"); fi

echo "== warming up: grading the framework's own stubs for $milestone (builds the framework once)"
warm=$(mktemp -d)
mkdir -p "$warm/stubs" "$cache"
cp -a student "$warm/stubs/student"
"$convlab" grade "$warm/stubs" --milestone "$milestone" --out "$warm/out" --cache "$cache" \
  "${data_args[@]}" || true
if [ ! -s "$warm/out/results.json" ]; then
  echo "setup.sh: the grader could not grade the stubs (see the output above): fix that" \
       "before students submit" >&2
  exit 1
fi
rm -rf "$warm"
echo "== ready: milestone $milestone"
