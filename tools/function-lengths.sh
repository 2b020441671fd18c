#!/bin/sh
# Lists the longest functions of the C++ and CUDA sources, longest first: "LINES FILE:LINE NAME".
# Tests and CUDA kernels (__global__) are left out: a kernel's length is its algorithm.
# Usage: tools/function-lengths.sh [--over N] [DIR...]   (default: every source folder, N = 0)
# Needs Universal Ctags (Debian package universal-ctags).
set -eu
over=0
if [ "${1:-}" = "--over" ]; then
  [ $# -ge 2 ] || { echo "function-lengths.sh: --over needs a number of lines" >&2; exit 1; }
  over=$2
  shift 2
fi
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- reference grader datasets tools student milestones cli
command -v ctags >/dev/null ||
  { echo "function-lengths.sh: needs ctags: apt-get install universal-ctags" >&2; exit 1; }
files=$(mktemp)
kernels=$(mktemp)
trap 'rm -f "$files" "$kernels"' EXIT
for dir in "$@"; do
  [ -d "$dir" ] && find "$dir" -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' \
    -o -name '*.cuh' -o -name '*.h' \) -not -path '*/tests/*'
done | sort >"$files"
xargs grep -Hn '__global__' <"$files" | cut -d: -f1,2 >"$kernels" || true
ctags -L - --langmap=C++:+.cu.cuh --languages=C++ --kinds-C++=f --fields=+ne -x \
  --_xformat='%F %n %{end} %N' <"$files" |
  awk -v over="$over" -v kernels="$kernels" '
    BEGIN { while ((getline k < kernels) > 0) kernel[k] = 1 }
    $4 ~ /^__anon/ || $3 == "" { next }  # a lambda: counted in the function around it
    {
      # A kernel: __global__ on the line of its name or on one of the three before it.
      for (l = $2 - 3; l <= $2; ++l) if (($1 ":" l) in kernel) next
      lines = $3 - $2 + 1
      if (lines > over) print lines, $1 ":" $2, $4
    }' | sort -k1,1nr -k2,2
