//===- CpuKernels.h - fp32 kernels on the host with OpenBLAS ----*- C++ -*-===//
//
// The CPU backend's Kernels: fp32 only (a bf16 plan's arrays reach them
// widened, through StagedKernels), each call run at once, on the calling
// thread and the kernel threads (Threads.h) where it splits by rows. The
// reference the CUDA kernels are tested against. One op family per file, as
// the CUDA backend's: CpuKernels.cpp (GEMM, copies, adds), Fp8 (FP8 GEMMs),
// Norm, Activation, Attention, Embedding, Softmax, Vocabulary, Adam.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CPU_CPUKERNELS_H
#define SLUICE_RUNTIME_CPU_CPUKERNELS_H

#include "Backend.h"

namespace sluice::rt {

class CpuKernels final : public Kernels {
public:
  // Every kernel of the list (runtime/Kernels.def).
#define SLUICE_KERNEL(NAME, PARAMS, ARGS, STAGING) void NAME PARAMS override;
#include "Kernels.def"
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_CPU_CPUKERNELS_H
