#!/usr/bin/env bash
# Prints the build preset for this machine: default (CUDA) where the CUDA toolkit is
# installed, cpu otherwise. CI compiles the CUDA code on machines without a GPU, so a GPU is
# not asked for unless:
#
#   tools/preset.sh --runnable   default only where the CUDA toolkit and a usable GPU are both
#                                here (what the starter kit builds: code this machine can run)
#
# CONVLAB_PRESET, when set, is printed instead (e.g. CONVLAB_PRESET=default tools/setup.sh).
set -euo pipefail
case "${1:-}" in
  "" | --runnable) ;;
  *) echo "tools/preset.sh: unknown option '$1' (use --runnable, or nothing)" >&2; exit 1 ;;
esac
if [ -n "${CONVLAB_PRESET:-}" ]; then
  echo "$CONVLAB_PRESET"
elif ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo cpu
elif [ "${1:-}" = --runnable ] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo cpu
else
  echo default
fi
