//===- AttentionCudnnNone.cpp - A build without cudnn-frontend ------------===//
//
// Where setup.sh could not fetch the frontend's headers: no cuDNN path, so
// every attention runs the hand-written kernel (AttentionCudnn.h).

#include "AttentionCudnn.h"

namespace sluice::rt::cuda {

struct CudnnAttention::Graph {};

std::string describeDnnLibrary() {
  return "cuDNN not built in (no cudnn-frontend headers)";
}

CudnnAttention::CudnnAttention(ErrorSink &errors) : errors(errors) {}
CudnnAttention::~CudnnAttention() = default;

Status CudnnAttention::create(ErrorSink &,
                              std::unique_ptr<CudnnAttention> &out) {
  out.reset();
  return Status::ok();
}

bool CudnnAttention::forward(cudaStream_t, const AttentionShape &, DevicePtr,
                             DevicePtr, DevicePtr, DevicePtr, DevicePtr) {
  return false;
}

bool CudnnAttention::backward(cudaStream_t, const AttentionShape &, DevicePtr,
                              DevicePtr, DevicePtr, DevicePtr, DevicePtr,
                              DevicePtr, DevicePtr, DevicePtr &, DevicePtr &) {
  return false;
}

} // namespace sluice::rt::cuda
