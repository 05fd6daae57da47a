//===- CudaDevice.h - One GPU as a Device -----------------------*- C++ -*-===//
//
// The CUDA backend's Device (runtime/Backend.h): device memory from a
// caching allocator, three streams -- compute, pipeline communication, and
// the vocabulary stream at the device's highest priority -- CUDA events
// (timed), and CudaKernels bound to each stream, sharing one cuBLASLt
// handle and workspace.
//
// Errors: kernels are enqueued without a status; the first failure of a
// launch or of an asynchronous copy is kept and reported by the next
// synchronize() (once per step), naming the call that failed.
//
// Freed memory: a buffer released while streams may still use it is kept
// until each stream has passed the release point (an event per stream),
// then reused for an allocation of the same size -- so the vocabulary
// shards can free a microbatch's state as soon as the host has issued its
// last use.
//
// Lanes (Backend.h, Device::openLanes): a fifth stream and its kernels
// for an overlapped group's backward. The Compute stream and kernels this
// device hands out are the calling thread's lane's: a thread after
// setLane(1) enqueues on the lane stream through the same objects.
//
// Threading: one host thread drives a CudaDevice at a time (an
// overlapped group's two lanes take turns, PassLanes.h).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_CUDADEVICE_H
#define SLUICE_RUNTIME_CUDA_CUDADEVICE_H

#include "Backend.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>

#include <functional>
#include <map>
#include <atomic>
#include <memory>
#include <vector>

namespace sluice::rt::cuda {

/// A SLUICE_* switch of the environment: unset or empty gives `otherwise`,
/// "0" false, anything else true.
inline bool getEnvFlag(const char *name, bool otherwise) {
  const char *value = std::getenv(name);
  if (!value || !*value)
    return otherwise;
  return std::string(value) != "0";
}

class CudaKernels;
class GemmEngine;

/// Where launches and asynchronous calls report failures.
class ErrorSink {
public:
  /// Keeps the first failure; later ones are consequences.
  void check(cudaError_t error, const char *expression, const char *file,
             int line);
  /// The kept failure (ok if none); clears it.
  Status take();
  /// Keeps `failure` unless one is kept already.
  void fail(const Status &failure) {
    if (first.isOk())
      first = failure;
  }

private:
  Status first;
};

/// Records a failing CUDA call into an ErrorSink.
#define SLUICE_CUDA_RECORD(sink, expr)                                         \
  (sink).check((expr), #expr, __FILE__, __LINE__)

/// Grows stream-ordered scratch: `buffer` (of `size` bytes) holds at least
/// `bytes` after it, the old buffer freed after the work that used it; null
/// (recorded in `errors`) when the allocation fails.
void *reserveScratch(ErrorSink &errors, void *&buffer, size_t &size,
                     size_t bytes, cudaStream_t stream);

class CudaDevice final : public Device {
public:
  ~CudaDevice() override;
  /// Opens GPU `index` and creates its streams, events and handles.
  static Status open(int index, std::unique_ptr<CudaDevice> &out);

  std::string describe() const override { return description; }
  bool isAsynchronous() const override { return true; }
  bool supports(const Precision &) const override { return true; }
  Status allocate(DType type, int64_t count, DeviceBuffer &out) override;
  int64_t getFreeBytes() override;
  Stream &getStream(StreamKind kind) override;
  Kernels &getKernels(StreamKind kind) override;
  std::unique_ptr<Event> createEvent() override;
  Status openLanes() override;
  void setLane(int lane) override;
  void upload(DevicePtr dst, const void *host, int64_t bytes,
              Stream &stream) override;
  void download(void *host, DevicePtr src, int64_t bytes,
                Stream &stream) override;

  int getIndex() const { return index; }
  /// Called while the host waits for a stream (synchronize), with the
  /// seconds waited so far: an error ends the wait (a communicator's
  /// failure or timeout, NcclMesh::check).
  void setWaitHook(std::function<Status(double)> hook) {
    waitHook = std::move(hook);
  }
  ErrorSink &getErrors() { return errors; }
  /// Whether the GPU has FP8 tensor cores (compute capability 8.9+) and
  /// SLUICE_FP8_TENSOR_CORES leaves them on.
  bool hasFp8TensorCores() const;
  /// GEMMs multiplied on FP8 tensor cores so far, every stream's.
  int64_t getFp8Multiplies() const;
  /// The CUDA stream behind a Stream of this device.
  static cudaStream_t getHandle(Stream &stream);
  static cudaEvent_t getHandle(Event &event);

protected:
  void release(void *data, int64_t bytes) override;

private:
  class CudaStream;
  class LaneKernels;
  /// The streams a freed block waits for: every kind's and lane 1's.
  static constexpr int kPassed = kStreamKinds + 1;
  struct Freed {
    void *data;
    cudaEvent_t passed[kPassed];
  };
  CudaDevice() = default;
  /// A freed block of `bytes` every stream is done with, or null.
  void *reuse(int64_t bytes);
  /// Before a copy between `host` and `stream`: waits for the stream with
  /// the hook if `host` is pageable; false (the failure kept) if that wait
  /// failed and the copy must not be made.
  bool settleForPageable(const void *host, Stream &stream);
  /// Returns every reusable cached block to CUDA (before an allocation
  /// that failed is retried).
  void trim();

  int index = 0;
  std::string description;
  ErrorSink errors;
  std::unique_ptr<CudaStream> streams[kStreamKinds];
  std::unique_ptr<GemmEngine> gemm;
  std::unique_ptr<CudaKernels> kernels[kStreamKinds];
  /// Lane 1's compute kernels (openLanes), and what getKernels(Compute)
  /// hands out: the calling thread's lane's.
  std::unique_ptr<CudaKernels> laneKernels;
  std::unique_ptr<LaneKernels> computeKernels;
  /// Rounded size -> blocks waiting to be reused.
  std::map<int64_t, std::vector<Freed>> cache;
  std::vector<cudaEvent_t> spareEvents;
  std::function<Status(double)> waitHook;
  bool fp8TensorCores = false;
  /// Every kernels' steady FP8 copies' generation
  /// (CudaKernels::shareFp8Generation): one for the device.
  std::shared_ptr<std::atomic<int64_t>> fp8Generation =
      std::make_shared<std::atomic<int64_t>>(0);
};

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_CUDADEVICE_H
