#!/usr/bin/env bash
# Downloads the four Fashion-MNIST files into DIR and checks their SHA-256 sums.
# On Debian and Ubuntu, `apt-get install dataset-fashion-mnist` gives the same files instead.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: datasets/fetch-fashion-mnist.sh [--from SOURCE] DIR

Downloads the Fashion-MNIST data set (four .gz files, about 30 MB) into DIR, checks that
each file's SHA-256 matches the official release, and prints how to point convlab at it.

  --from SOURCE   take the files from SOURCE instead of the official servers: a local
                  directory, or a base URL (http://, https://, file://). The environment
                  variable CONVLAB_FETCH_FROM does the same.
  -h, --help      show this message

Files already in DIR with the right checksum are kept. A file whose checksum does not
match is deleted and the script exits with status 1.
EOF
}

die() {
  echo "fetch-fashion-mnist: $*" >&2
  exit 1
}

# SHA-256 of the official files (identical to Debian's dataset-fashion-mnist package).
# A function rather than an associative array: macOS still ships bash 3.2.
expected_sha256() {
  case "$1" in
    train-images-idx3-ubyte.gz) echo b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7 ;;
    train-labels-idx1-ubyte.gz) echo 0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056 ;;
    t10k-images-idx3-ubyte.gz) echo cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa ;;
    t10k-labels-idx1-ubyte.gz) echo 8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05 ;;
    *) die "no checksum for $1" ;;
  esac
}
FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz
       t10k-labels-idx1-ubyte.gz)
MIRRORS=(
  https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion
  http://fashion-mnist.s3-website.eu-central-1.amazonaws.com
)

source_arg="${CONVLAB_FETCH_FROM:-}"
dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --from)
      [[ $# -ge 2 ]] || { usage >&2; die "--from needs a directory or URL"; }
      source_arg="$2"; shift 2 ;;
    --from=*) source_arg="${1#--from=}"; shift ;;
    -*) usage >&2; die "unknown option $1" ;;
    *)
      [[ -z "$dir" ]] || { usage >&2; die "only one DIR may be given"; }
      dir="$1"; shift ;;
  esac
done
[[ -n "$dir" ]] || { usage >&2; exit 2; }

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  elif command -v shasum >/dev/null 2>&1; then
    shasum -a 256 "$1" | cut -d' ' -f1
  else
    die "neither sha256sum nor shasum is installed; install coreutils"
  fi
}

# fetch URL OUT: download with curl or wget.
fetch() {
  if command -v curl >/dev/null 2>&1; then
    curl --fail --location --silent --show-error --retry 2 -o "$2" "$1"
  elif command -v wget >/dev/null 2>&1; then
    wget --quiet -O "$2" "$1"
  else
    die "neither curl nor wget is installed; install one, or use --from DIR with files you have"
  fi
}

# get NAME OUT: from the local directory, the given URL, or the official mirrors in turn.
get() {
  local name="$1" out="$2" base
  if [[ -n "$source_arg" && -d "$source_arg" ]]; then
    [[ -f "$source_arg/$name" ]] || die "$source_arg/$name does not exist"
    cp -- "$source_arg/$name" "$out"
    return
  fi
  if [[ -n "$source_arg" ]]; then
    fetch "${source_arg%/}/$name" "$out" || die "could not download ${source_arg%/}/$name"
    return
  fi
  for base in "${MIRRORS[@]}"; do
    echo "  downloading $base/$name"
    if fetch "$base/$name" "$out"; then return; fi
    echo "  (failed; trying the next mirror)" >&2
  done
  die "could not download $name from any mirror; check your network connection"
}

mkdir -p -- "$dir" || die "cannot create $dir"
dir="$(cd -- "$dir" && pwd)"

for name in "${FILES[@]}"; do
  target="$dir/$name"
  want="$(expected_sha256 "$name")"
  if [[ -f "$target" && "$(sha256_of "$target")" == "$want" ]]; then
    echo "$name: already present, checksum OK"
    continue
  fi
  part="$target.part"
  rm -f -- "$part"
  get "$name" "$part"
  got="$(sha256_of "$part")"
  if [[ "$got" != "$want" ]]; then
    rm -f -- "$part"
    die "$name: SHA-256 mismatch (got $got, expected $want); the download is damaged or not the official file. It was deleted; run the script again, or install the Debian package dataset-fashion-mnist."
  fi
  mv -f -- "$part" "$target"
  echo "$name: checksum OK"
done

echo
echo "Fashion-MNIST is in $dir. Use it with:"
echo "  convlab run ... --data $dir"
echo "or"
echo "  export CONVLAB_DATA=$dir"
