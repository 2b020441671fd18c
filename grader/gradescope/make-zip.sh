#!/usr/bin/env bash
# Makes the Gradescope autograder zip: setup.sh and run_autograder at the top, the framework
# as the student release has it (no staff solutions, no staff tools), the hidden models in
# hidden-models/, the Fashion-MNIST test set in data/fashion-mnist/, and the milestone to
# grade in gradescope.env.
#
#   grader/gradescope/make-zip.sh [--out FILE] [--milestone m2] [--models DIR]... [--data DIR]
#                                 [--convlab BIN]
#
#   --out FILE      the zip to write (default: convlab-autograder-<milestone>.zip)
#   --milestone M   what Gradescope grades: m2 (the CPU milestone; default). GPU milestones are
#                   graded on the course's GPU machine with `convlab grade-all` instead.
#   --models DIR    a folder of hidden models (*.safetensors); repeatable
#   --data DIR      Fashion-MNIST folder (default $CONVLAB_DATA, else
#                   /usr/share/datasets/fashion-mnist)
#   --convlab BIN   the convlab that writes the release (default: the first built one of
#                   build/default, build/cpu)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
here=$repo/grader/gradescope

out=''
milestone=m2
data=${CONVLAB_DATA:-/usr/share/datasets/fashion-mnist}
convlab=
models=()
# The comment block above, as help.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2;;
    --milestone) milestone=$2; shift 2;;
    --models) models+=("$2"); shift 2;;
    --data) data=$2; shift 2;;
    --convlab) convlab=$2; shift 2;;
    -h|--help) usage 0;;
    *) echo "make-zip.sh: unknown argument '$1'" >&2; usage 1;;
  esac
done
die() { echo "make-zip.sh: $*" >&2; exit 1; }

case $milestone in
  m2) ;;
  m3|final|all) echo "make-zip.sh: note: $milestone needs a GPU; Gradescope's machines have none," \
                     "so its GPU checks will be skipped. Grade it with convlab grade-all on the" \
                     "course's GPU machine (docs/instructor.md)." >&2;;
  *) die "unknown milestone '$milestone': choose m2, m3, final or all";;
esac
out=${out:-convlab-autograder-$milestone.zip}
case $out in /*) ;; *) out=$PWD/$out;; esac

if [ -z "$convlab" ]; then
  for preset in default cpu; do
    if [ -x "$repo/build/$preset/reference/driver/convlab" ]; then
      convlab=$repo/build/$preset/reference/driver/convlab
      break
    fi
  done
fi
if [ -z "$convlab" ] || [ ! -x "$convlab" ]; then
  die "no convlab built: run 'cmake --preset cpu && cmake --build --preset cpu' first, or pass --convlab BIN"
fi
for f in t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  [ -f "$data/$f" ] || die "$data/$f not found: pass --data DIR (the Fashion-MNIST folder)"
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
kit=$stage/autograder
echo "== the framework (student release) from $repo"
CONVLAB_ROOT=$repo "$convlab" release --out "$kit" >"$stage/release.log" ||
  { cat "$stage/release.log" >&2; die "convlab release failed"; }
cp "$here/setup.sh" "$here/run_autograder" "$kit/"
chmod +x "$kit/setup.sh" "$kit/run_autograder"

mkdir -p "$kit/data/fashion-mnist"
cp "$data/t10k-images-idx3-ubyte.gz" "$data/t10k-labels-idx1-ubyte.gz" "$kit/data/fashion-mnist/"

n=0
for dir in "${models[@]}"; do
  [ -d "$dir" ] || die "--models $dir: no such folder"
  mkdir -p "$kit/hidden-models"
  for m in "$dir"/*.safetensors; do
    [ -f "$m" ] || continue
    [ -e "$kit/datasets/models/$(basename "$m")" ] &&
      die "$m has the name of a public model; give hidden models names of their own"
    cp "$m" "$kit/hidden-models/"
    n=$((n + 1))
  done
done
[ "$n" -gt 0 ] || echo "make-zip.sh: note: no hidden model (--models DIR): only the public models are graded" >&2

echo "CONVLAB_MILESTONE=$milestone" >"$kit/gradescope.env"

rm -f "$out"
(cd "$kit" && shopt -s dotglob && cmake -E tar cf "$out" --format=zip -- *)
echo "== $out: milestone $milestone, $n hidden model(s), $(du -h "$out" | cut -f1)"
echo "Upload it as the autograder of a Gradescope programming assignment (base image: Ubuntu 24.04)."
