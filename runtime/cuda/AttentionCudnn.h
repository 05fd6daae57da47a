//===- AttentionCudnn.h - cuDNN's fused attention for bf16 slices -*- C++
//-*-===//
//
// The fast path of Kernels::attentionForward/attentionBackward: cuDNN's
// scaled-dot-product attention (FlashAttention-2 style) through the
// header-only cudnn-frontend, for bf16 activations. A token slice is a
// bottom-right causal mask over keys [0, offset + tokens) -- the slice's
// queries are the last rows of the square -- read in place from the
// microbatch's key/value cache by strides; grouped-query heads natively;
// the backward pass deterministic unless SLUICE_ATTENTION_DETERMINISTIC=0
// (cuDNN's atomic dQ accumulation: faster, run-to-run rounding differs).
// SLUICE_CUDNN_AUTOTUNE=1 times every plan cuDNN offers for a shape on its
// first run and keeps the fastest. cuDNN writes dK and dV, where the
// runtime adds into fp32 accumulators over slices: they go to scratch and
// are added by CudaKernels.
//
// A graph is built per slice shape on first use and kept. Where cuDNN
// refuses a shape (head size, alignment, an old library) the caller falls
// back to the hand-written kernel; this is said once per shape on stderr.
// Built only where the frontend's headers were found (setup.sh fetches
// them from PyPI's nvidia-cudnn-frontend); SLUICE_CUDNN_ATTENTION=0 in the
// environment turns it off at run time.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_ATTENTIONCUDNN_H
#define SLUICE_RUNTIME_CUDA_ATTENTIONCUDNN_H

#include "Backend.h"
#include "CudaDevice.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

namespace sluice::rt::cuda {

/// The cuDNN this process loaded (version and file), or that the build
/// has none.
std::string describeDnnLibrary();

class CudnnAttention {
public:
  /// Null (and ok) where this build has no cuDNN frontend.
  static Status create(ErrorSink &errors, std::unique_ptr<CudnnAttention> &out);
  ~CudnnAttention();

  /// Whether cuDNN ran the forward pass (false: use the fallback).
  bool forward(cudaStream_t stream, const AttentionShape &s, DevicePtr q,
               DevicePtr keys, DevicePtr values, DevicePtr lse,
               DevicePtr context);
  /// Whether cuDNN ran the backward pass; dK and dV of keys [0, offset +
  /// tokens) are then in `dkScratch` and `dvScratch` ([rows, offset +
  /// tokens, kvHeads, headDim], bf16), valid until the next call.
  bool backward(cudaStream_t stream, const AttentionShape &s, DevicePtr q,
                DevicePtr keys, DevicePtr values, DevicePtr context,
                DevicePtr lse, DevicePtr dcontext, DevicePtr dq,
                DevicePtr &dkScratch, DevicePtr &dvScratch);

private:
  struct Graph;
  using Key = std::tuple<bool, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t>;
  explicit CudnnAttention(ErrorSink &errors);
  /// The built graph of a shape, or null where cuDNN refuses it.
  Graph *getGraph(bool backward, const AttentionShape &s);
  /// Runs `g` (timing its plans first where asked); `pack` maps cuDNN's
  /// tensor ids to device pointers (std::unordered_map<int64_t, void *>).
  void run(Graph &g, cudaStream_t stream,
           std::unordered_map<int64_t, void *> &pack, void *workspace,
           const char *what);
  /// At least `bytes` of stream-ordered scratch in `buffer`.
  void *reserve(void *&buffer, size_t &size, size_t bytes, cudaStream_t stream);

  ErrorSink &errors;
  void *handle = nullptr; // cudnnHandle_t
  std::map<Key, std::unique_ptr<Graph>> graphs;
  void *workspace = nullptr, *dk = nullptr, *dv = nullptr;
  size_t workspaceBytes = 0, dkBytes = 0, dvBytes = 0;
  bool deterministic = true, autotune = false;
};

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_ATTENTIONCUDNN_H
