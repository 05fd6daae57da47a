#!/usr/bin/env bash
# Builds NCCL from its source for Hopper (sm_90) with only the collectives
# Sluice calls, for the GPU suite's bundle (tools/gpu/bundle.sh takes it
# from NCCL_HOME). Users do not need this: on a cluster, build Sluice
# against the cluster's NCCL (NCCL_HOME=... bash setup.sh build).
#
#   tools/gpu/build-nccl.sh NCCL_SOURCE(.tar.xz or directory) [OUT_DIR]
#
# NCCL 2.30 is the first release that lets several ranks of one
# communicator share a GPU (NCCL_MULTI_RANK_GPU_ENABLE=1), which is how the
# suite runs 2, 4 and 8 NCCL ranks on one test GPU. Measured on 2 cores:
# about 13 minutes; libnccl.so.2.30.7 is 33 MB (10 MB xz-compressed).
set -euo pipefail
src=${1:?usage: build-nccl.sh NCCL_SOURCE [OUT_DIR]}
out=${2:-build-gpu/nccl}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -f "$src" ]; then
  tar -C "$out" -xJf "$src"
  src=$(ls -d "$out"/nccl-*/ | head -n 1)
fi
src=$(cd "$src" && pwd)
# CUDA 13 ships NCCL 2.28's own headers in its include folder, which would
# shadow the source's: build against a CUDA folder without them.
cuda=$out/cuda-home
rm -rf "$cuda" && mkdir -p "$cuda/include"
for entry in /usr/local/cuda/*; do
  [ "$(basename "$entry")" = include ] || ln -s "$entry" "$cuda/"
done
for header in /usr/local/cuda/include/*; do
  case $(basename "$header") in nccl*) ;; *) ln -s "$header" "$cuda/include/" ;; esac
done
# The functions the runtime calls (runtime/cuda/NcclCommunicator.cpp):
# send/receive, broadcast, all-gather, and sum/max reductions of f32 and
# bf16.
make -C "$src" -j"$(nproc)" src.build CUDA_HOME="$cuda" \
  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
  ONLY_FUNCS="SendRecv|AllGather * *|Broadcast * *|AllReduce Sum f32 * *|AllReduce Sum bf16 * *|AllReduce MinMax f32 * *|AllReduce MinMax bf16 * *|ReduceScatter Sum f32 * *|ReduceScatter Sum bf16 * *|Reduce Sum f32 * *|Reduce Sum bf16 * *" \
  BUILDDIR="$out/build"
echo "build-nccl.sh: NCCL_HOME=$out/build ($(du -h "$out"/build/lib/libnccl.so.2.* | cut -f1))"
