//===- CudaDevice.cu - One GPU as a Device --------------------------------===//

#include "CudaCheck.h"
#include "CudaDevice.h"
#include "CudaKernels.h"

#include <cuda_runtime.h>

#include <chrono>
#include <sstream>
#include <thread>

namespace sluice::rt::cuda {

namespace {
/// The lane of the calling thread (Device::setLane): which of the Compute
/// stream's two CUDA streams, and which kernels, its work goes to.
thread_local int laneOfThread = 0;
} // namespace

void ErrorSink::check(cudaError_t error, const char *expression,
                      const char *file, int line) {
  if (error == cudaSuccess || !first.isOk())
    return;
  (void)(first = cudaFailure(error, expression, file, line));
}

Status ErrorSink::take() {
  Status kept = first;
  (void)(first = Status::ok());
  return kept;
}

/// A CUDA stream; synchronize() also reports what the device's sink kept.
/// The Compute stream may have a second CUDA stream, lane 1's: a thread in
/// lane 1 (setLane) enqueues there.
class CudaDevice::CudaStream final : public Stream {
public:
  CudaStream(cudaStream_t handle, ErrorSink &errors,
             std::function<Status(double)> &hook)
      : handle(handle), errors(errors), hook(hook) {}
  ~CudaStream() override {
    cudaStreamDestroy(handle);
    if (laneHandle)
      cudaStreamDestroy(laneHandle);
  }
  /// The CUDA stream the calling thread's work goes to.
  cudaStream_t current() const {
    return laneHandle && laneOfThread == 1 ? laneHandle : handle;
  }
  void wait(Event &event) override {
    SLUICE_CUDA_RECORD(errors,
                       cudaStreamWaitEvent(current(), getHandle(event), 0));
  }
  Status synchronize() override {
    cudaStream_t handle = current();
    if (!hook) {
      SLUICE_CUDA_RECORD(errors, cudaStreamSynchronize(handle));
    } else {
      // Polled, so that a communicator's failure or timeout ends the wait
      // instead of a kernel waiting forever for a peer.
      using Clock = std::chrono::steady_clock;
      auto start = Clock::now(), checked = start;
      cudaError_t status;
      while ((status = cudaStreamQuery(handle)) == cudaErrorNotReady) {
        auto now = Clock::now();
        if (now - checked > std::chrono::milliseconds(10)) {
          checked = now;
          if (Status st =
                  hook(std::chrono::duration<double>(now - start).count());
              !st)
            return st;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      SLUICE_CUDA_RECORD(errors, status);
    }
    // An asynchronous kernel fault surfaces here.
    SLUICE_CUDA_RECORD(errors, cudaGetLastError());
    return errors.take();
  }
  /// Lane 0's (and every other kind's) stream; lane 1's, once opened.
  cudaStream_t handle;
  cudaStream_t laneHandle = nullptr;

private:
  ErrorSink &errors;
  std::function<Status(double)> &hook;
};

/// The Compute kernels as the device hands them out: each call goes to
/// the calling thread's lane's CudaKernels (lane 0's until openLanes).
class CudaDevice::LaneKernels final : public Kernels {
public:
  explicit LaneKernels(CudaKernels &first) : lanes{&first, nullptr} {}
  void setLane1(CudaKernels *kernels) { lanes[1] = kernels; }

  bool supports(Id id, const Precision &precision) const override {
    return lanes[0]->supports(id, precision);
  }
#define SLUICE_KERNEL(NAME, PARAMS, ARGS, STAGING)                             \
  void NAME PARAMS override { current().NAME ARGS; }
#include "Kernels.def"
  void addNormForward(DevicePtr x, DevicePtr residual, DevicePtr gamma,
                      DevicePtr beta, int64_t rows, int64_t cols, bool rms,
                      float eps, DevicePtr y, DevicePtr xhat,
                      DevicePtr rstd) override {
    current().addNormForward(x, residual, gamma, beta, rows, cols, rms, eps,
                             y, xhat, rstd);
  }
  void normBackwardAdd(DevicePtr dy, DevicePtr xhat, DevicePtr rstd,
                       DevicePtr gamma, int64_t rows, int64_t cols, bool rms,
                       DevicePtr residual, DevicePtr dx) override {
    current().normBackwardAdd(dy, xhat, rstd, gamma, rows, cols, rms,
                              residual, dx);
  }

private:
  Kernels &current() const {
    return laneOfThread == 1 && lanes[1] ? *lanes[1] : *lanes[0];
  }
  CudaKernels *lanes[2];
};

namespace {
class CudaEvent final : public Event {
public:
  CudaEvent(cudaEvent_t handle, ErrorSink &errors)
      : handle(handle), errors(errors) {}
  ~CudaEvent() override { cudaEventDestroy(handle); }
  void record(Stream &stream) override {
    SLUICE_CUDA_RECORD(errors,
                       cudaEventRecord(handle, CudaDevice::getHandle(stream)));
  }
  bool isComplete() override {
    cudaError_t status = cudaEventQuery(handle);
    if (status == cudaErrorNotReady)
      return false;
    SLUICE_CUDA_RECORD(errors, status);
    return true;
  }
  double secondsSince(Event &start) override {
    float ms = 0;
    SLUICE_CUDA_RECORD(errors, cudaEventElapsedTime(
                                   &ms, CudaDevice::getHandle(start), handle));
    return double(ms) / 1000.0;
  }
  cudaEvent_t handle;

private:
  ErrorSink &errors;
};

/// Allocations are rounded up so that freed blocks fit more requests.
int64_t roundUp(int64_t bytes) {
  const int64_t granule = 512;
  return (std::max<int64_t>(bytes, 1) + granule - 1) / granule * granule;
}
} // namespace

cudaStream_t CudaDevice::getHandle(Stream &stream) {
  return static_cast<CudaStream &>(stream).current();
}

void *reserveScratch(ErrorSink &errors, void *&buffer, size_t &size,
                     size_t bytes, cudaStream_t stream) {
  if (bytes <= size)
    return buffer;
  // Stream-ordered: the old buffer goes after the work that used it.
  if (buffer)
    SLUICE_CUDA_RECORD(errors, cudaFreeAsync(buffer, stream));
  buffer = nullptr;
  size = 0;
  SLUICE_CUDA_RECORD(errors, cudaMallocAsync(&buffer, bytes, stream));
  if (buffer)
    size = bytes;
  return buffer;
}

cudaEvent_t CudaDevice::getHandle(Event &event) {
  return static_cast<CudaEvent &>(event).handle;
}

Status CudaDevice::open(int index, std::unique_ptr<CudaDevice> &out) {
  std::unique_ptr<CudaDevice> device(new CudaDevice());
  device->index = index;
  CUDA_CHECK(cudaSetDevice(index));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  device->description =
      "cuda:" + std::to_string(index) + " (" + prop.name + ")";
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  for (int k = 0; k < kStreamKinds; ++k) {
    // The vocabulary collectives run at the highest priority (§6.1), so
    // their short kernels are not queued behind a transformer layer's; so
    // do the tensor group's, whose NCCL kernels then take SMs as the
    // weight GEMM beside them frees them (the pass waits for them next).
    int priority = StreamKind(k) == StreamKind::Vocabulary ||
                           StreamKind(k) == StreamKind::Tensor
                       ? greatest
                       : least;
    cudaStream_t handle;
    CUDA_CHECK(
        cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, priority));
    device->streams[k] =
        std::make_unique<CudaStream>(handle, device->errors, device->waitHook);
    std::unique_ptr<GemmEngine> gemm;
    if (Status st = GemmEngine::create(device->errors, gemm); !st)
      return st;
    // Attention runs on the compute stream only.
    std::unique_ptr<CudnnAttention> cudnn;
    if (StreamKind(k) == StreamKind::Compute)
      if (Status st = CudnnAttention::create(device->errors, cudnn); !st)
        return st;
    device->kernels[k] = std::make_unique<CudaKernels>(
        handle, device->errors, std::move(gemm), std::move(cudnn));
    // FP8 tensor cores: Ada (8.9) and Hopper (9.0) onwards.
    device->kernels[k]->setFp8TensorCores(prop.major * 10 + prop.minor >= 89);
    device->kernels[k]->shareFp8Generation(device->fp8Generation);
  }
  device->fp8TensorCores = prop.major * 10 + prop.minor >= 89;
  device->computeKernels = std::make_unique<LaneKernels>(
      *device->kernels[int(StreamKind::Compute)]);
  out = std::move(device);
  return Status::ok();
}

bool CudaDevice::hasFp8TensorCores() const {
  return kernels[int(StreamKind::Compute)]->usesFp8TensorCores();
}

int64_t CudaDevice::getFp8Multiplies() const {
  int64_t count = laneKernels ? laneKernels->getFp8Multiplies() : 0;
  for (const std::unique_ptr<CudaKernels> &k : kernels)
    count += k->getFp8Multiplies();
  return count;
}

Status CudaDevice::openLanes() {
  if (laneKernels)
    return Status::ok();
  // Lane 1 at the compute stream's priority, with kernels of its own: a
  // cuBLASLt workspace, a cuDNN handle and FP8 scratch that the other
  // lane's kernels, running at the same time, do not share.
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t handle;
  CUDA_CHECK(
      cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, least));
  streams[int(StreamKind::Compute)]->laneHandle = handle;
  std::unique_ptr<GemmEngine> gemm;
  if (Status st = GemmEngine::create(errors, gemm); !st)
    return st;
  std::unique_ptr<CudnnAttention> cudnn;
  if (Status st = CudnnAttention::create(errors, cudnn); !st)
    return st;
  laneKernels = std::make_unique<CudaKernels>(handle, errors, std::move(gemm),
                                              std::move(cudnn));
  laneKernels->setFp8TensorCores(fp8TensorCores);
  laneKernels->shareFp8Generation(fp8Generation);
  computeKernels->setLane1(laneKernels.get());
  return Status::ok();
}

void CudaDevice::setLane(int lane) {
  // A lane's thread may be new to CUDA, whose current device is per
  // thread.
  if (lane != 0)
    SLUICE_CUDA_RECORD(errors, cudaSetDevice(index));
  laneOfThread = lane;
}

CudaDevice::~CudaDevice() {
  cudaDeviceSynchronize();
  for (auto &[bytes, blocks] : cache)
    for (Freed &block : blocks) {
      cudaFree(block.data);
      for (cudaEvent_t event : block.passed)
        cudaEventDestroy(event);
    }
  for (cudaEvent_t event : spareEvents)
    cudaEventDestroy(event);
}

void *CudaDevice::reuse(int64_t bytes) {
  auto it = cache.find(bytes);
  if (it == cache.end())
    return nullptr;
  std::vector<Freed> &blocks = it->second;
  for (size_t k = 0; k < blocks.size(); ++k) {
    bool done = true;
    for (cudaEvent_t event : blocks[k].passed)
      done = done && cudaEventQuery(event) == cudaSuccess;
    if (!done)
      continue;
    void *data = blocks[k].data;
    for (cudaEvent_t event : blocks[k].passed)
      spareEvents.push_back(event);
    blocks.erase(blocks.begin() + k);
    return data;
  }
  return nullptr;
}

void CudaDevice::trim() {
  // Only blocks every stream is done with: waiting for the device here
  // could wait for an NCCL kernel whose peer waits for this rank.
  for (auto &[bytes, blocks] : cache)
    for (size_t k = 0; k < blocks.size();) {
      bool done = true;
      for (cudaEvent_t event : blocks[k].passed)
        done = done && cudaEventQuery(event) == cudaSuccess;
      if (!done) {
        ++k;
        continue;
      }
      cudaFree(blocks[k].data);
      for (cudaEvent_t event : blocks[k].passed)
        spareEvents.push_back(event);
      blocks.erase(blocks.begin() + k);
    }
  (void)cudaGetLastError();
}

Status CudaDevice::allocate(DType type, int64_t count, DeviceBuffer &out) {
  if (count < 0)
    return Status::error("cannot allocate " + std::to_string(count) +
                         " elements");
  int64_t bytes = roundUp(count * getSize(type));
  void *data = reuse(bytes);
  if (!data) {
    cudaError_t error = cudaMalloc(&data, size_t(bytes));
    if (error == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      trim();
      error = cudaMalloc(&data, size_t(bytes));
    }
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      std::ostringstream os;
      os << describe() << ": cannot allocate " << bytes << " bytes ("
         << cudaGetErrorString(error) << "; " << free << " of " << total
         << " bytes free)";
      return Status::error(os.str());
    }
  }
  // Zero-filled in compute-stream order: whatever uses the buffer first is
  // issued after this on the compute stream or after an event on it.
  SLUICE_CUDA_RECORD(
      errors, cudaMemsetAsync(data, 0, size_t(bytes),
                              getHandle(getStream(StreamKind::Compute))));
  out = DeviceBuffer(this, data, type, count);
  return Status::ok();
}

void CudaDevice::release(void *data, int64_t bytes) {
  // Kept until every stream has passed this point: work already enqueued
  // may still read or write it. (Without lane 1, its slot records on the
  // compute stream again.)
  Freed block{data, {}};
  CudaStream &compute = *streams[int(StreamKind::Compute)];
  for (int k = 0; k < kPassed; ++k) {
    cudaEvent_t event;
    if (!spareEvents.empty()) {
      event = spareEvents.back();
      spareEvents.pop_back();
    } else {
      SLUICE_CUDA_RECORD(
          errors, cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    }
    cudaStream_t stream =
        k < kStreamKinds       ? streams[k]->handle
        : compute.laneHandle ? compute.laneHandle
                             : compute.handle;
    SLUICE_CUDA_RECORD(errors, cudaEventRecord(event, stream));
    block.passed[k] = event;
  }
  cache[roundUp(bytes)].push_back(block);
}

int64_t CudaDevice::getFreeBytes() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess)
    return -1;
  return int64_t(free);
}

Stream &CudaDevice::getStream(StreamKind kind) { return *streams[int(kind)]; }

Kernels &CudaDevice::getKernels(StreamKind kind) {
  if (kind == StreamKind::Compute)
    return *computeKernels;
  return *kernels[int(kind)];
}

std::unique_ptr<Event> CudaDevice::createEvent() {
  cudaEvent_t handle = nullptr;
  SLUICE_CUDA_RECORD(errors, cudaEventCreate(&handle));
  return std::make_unique<CudaEvent>(handle, errors);
}

namespace {
/// Whether `host` is page-locked (cudaMallocHost), which CUDA copies to
/// and from without holding the host.
bool isPinned(const void *host) {
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, host) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}
} // namespace

bool CudaDevice::settleForPageable(const void *host, Stream &stream) {
  // A copy to or from pageable memory holds the host until the stream's
  // earlier work has run. With a wait hook (NCCL), that wait must be the
  // polled one: a kernel waiting for a dead peer would otherwise hold the
  // host inside cudaMemcpyAsync where no timeout can end it.
  if (!waitHook || isPinned(host))
    return true;
  if (Status st = stream.synchronize(); !st) {
    errors.fail(st);
    return false;
  }
  return true;
}

void CudaDevice::upload(DevicePtr dst, const void *host, int64_t bytes,
                        Stream &stream) {
  if (bytes > 0 && settleForPageable(host, stream))
    SLUICE_CUDA_RECORD(errors, cudaMemcpyAsync(dst.get(), host, size_t(bytes),
                                               cudaMemcpyHostToDevice,
                                               getHandle(stream)));
}

void CudaDevice::download(void *host, DevicePtr src, int64_t bytes,
                          Stream &stream) {
  if (bytes > 0 && settleForPageable(host, stream))
    SLUICE_CUDA_RECORD(errors, cudaMemcpyAsync(host, src.get(), size_t(bytes),
                                               cudaMemcpyDeviceToHost,
                                               getHandle(stream)));
}

} // namespace sluice::rt::cuda
