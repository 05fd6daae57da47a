//===- StagedKernels.h - bf16 plans on the fp32 CPU kernels -----*- C++ -*-===//
//
// The CPU backend's kernels compute in fp32. A bf16 plan keeps its
// activations, messages, key/value state and working weights in bf16 (the
// CUDA backend's storage), so that a config compiled for the GPU runs on
// any machine and a GPU run can be checked against the CPU at the same
// rounding points. StagedKernels sits in front of the fp32 kernels: each
// call's bf16 arrays are widened into fp32 scratch (exactly: bf16 is the
// upper half of an fp32), the fp32 kernel runs, and every array the call
// writes is rounded back to bf16 (to nearest even, as
// __float2bfloat16_rn) -- one rounding per kernel output, where the CUDA
// kernels store theirs. fp32 arrays pass straight through, so an fp32 plan
// pays a type check per pointer. The wrapper of every kernel is generated
// from the kernel list (runtime/Kernels.def), whose entries say which
// arrays a kernel reads and writes and how far each extends.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CPU_STAGEDKERNELS_H
#define SLUICE_RUNTIME_CPU_STAGEDKERNELS_H

#include "Backend.h"

namespace sluice::rt {

class StagedKernels final : public Kernels {
public:
  explicit StagedKernels(Kernels &fp32) : fp32(fp32) {}

  // Every kernel of the list (runtime/Kernels.def).
#define SLUICE_KERNEL(NAME, PARAMS, ARGS, STAGING) void NAME PARAMS override;
#include "Kernels.def"

private:
  Kernels &fp32;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_CPU_STAGEDKERNELS_H
