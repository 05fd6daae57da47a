//===- CudaCheck.h - One error check for CUDA calls -------------*- C++ -*-===//
//
// CUDA_CHECK(expr) evaluates a CUDA runtime call once and, on failure,
// returns from the enclosing function a Status naming the failing
// expression, its location and CUDA's message. Every CUDA call in the
// backend goes through it; none has its result ignored.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_CUDACHECK_H
#define SLUICE_RUNTIME_CUDA_CUDACHECK_H

#include "Status.h"

#include <cuda_runtime_api.h>

namespace sluice::rt::cuda {

/// `file:line: CUDA error <name> (<message>) in <expression>`.
Status cudaFailure(cudaError_t error, const char *expression, const char *file,
                   int line);

} // namespace sluice::rt::cuda

#define CUDA_CHECK(expr)                                                       \
  do {                                                                         \
    cudaError_t sluiceCudaError_ = (expr);                                     \
    if (sluiceCudaError_ != cudaSuccess)                                       \
      return ::sluice::rt::cuda::cudaFailure(sluiceCudaError_, #expr,          \
                                             __FILE__, __LINE__);              \
  } while (0)

#endif // SLUICE_RUNTIME_CUDA_CUDACHECK_H
