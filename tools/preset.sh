#!/usr/bin/env bash
# Prints the build preset for this machine: default (CUDA) where the CUDA toolkit is
# installed, cpu otherwise.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo default
else
  echo cpu
fi
