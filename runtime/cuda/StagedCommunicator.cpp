//===- StagedCommunicator.cpp - MPI through pinned host memory ------------===//

#include "StagedCommunicator.h"

#include <cuda_runtime.h>

#include <functional>
#include <thread>

namespace sluice::rt::cuda {

PinnedPool::~PinnedPool() {
  cudaDeviceSynchronize();
  for (auto &[bytes, blocks] : free)
    for (Block &block : blocks)
      cudaFreeHost(block.data);
}

void *PinnedPool::take(int64_t bytes) {
  auto it = free.find(bytes);
  if (it != free.end())
    for (size_t k = 0; k < it->second.size(); ++k) {
      Block &block = it->second[k];
      if (block.pending && !block.pending->isComplete())
        continue;
      void *data = block.data;
      it->second.erase(it->second.begin() + k);
      return data;
    }
  void *block = nullptr;
  if (cudaMallocHost(&block, size_t(std::max<int64_t>(bytes, 1))) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return block;
}

void PinnedPool::give(void *data, int64_t bytes,
                      std::unique_ptr<Event> pending) {
  free[bytes].push_back({data, std::move(pending)});
}

namespace {
/// One staged transfer: copy out (unless it only receives), post MPI, copy
/// back (unless it only sends).
class StagedRequest final : public Request {
public:
  enum class Kind { Send, Receive, Collective };

  /// The result comes back to `device` (count elements) unless `back`
  /// is given: then `backCount` elements from `backOffset` elements into
  /// the staging buffer, which holds `extra` elements past the copy out.
  StagedRequest(StagedCommunicator &comm, Kind kind, DevicePtr device,
                int64_t count, Stream &stream,
                std::function<std::unique_ptr<Request>(DevicePtr)> post,
                int64_t extra = 0, DevicePtr back = nullptr,
                int64_t backCount = 0, int64_t backOffset = 0)
      : comm(comm), kind(kind), device(device), count(count), stream(stream),
        post(std::move(post)),
        bytes((count + extra) * getSize(device.getType())),
        back(back ? back : device),
        backBytes((back ? backCount : count) * getSize(device.getType())),
        backOffset(backOffset * getSize(device.getType())) {
    CudaDevice &gpu = comm.getDevice();
    staging = comm.getPool().take(bytes);
    if (!staging) {
      failed = Status::error("out of pinned host memory staging " +
                             std::to_string(bytes) + " bytes");
      return;
    }
    copiedOut = gpu.createEvent();
    copiedBack = gpu.createEvent();
    if (kind == Kind::Receive) {
      // Nothing to copy out: receive into the staging buffer at once.
      pending = this->post(host());
      return;
    }
    gpu.download(staging, device, count * getSize(device.getType()), stream);
    copiedOut->record(stream);
  }

  ~StagedRequest() override {
    // An unfinished request (an aborting run) keeps its staging buffer:
    // MPI may still write into it. A finished one may still be read by its
    // copy back to the device.
    if (staging && done)
      comm.getPool().give(staging, bytes,
                          kind == Kind::Send ? nullptr : std::move(copiedBack));
  }

  bool test() override {
    if (done || !failed.isOk())
      return true;
    if (!pending) {
      if (!copiedOut->isComplete())
        return false;
      pending = post(host());
    }
    if (!pending->test())
      return false;
    if (kind != Kind::Send) {
      comm.getDevice().upload(back, static_cast<char *>(staging) + backOffset,
                              backBytes, stream);
      copiedBack->record(stream);
    }
    done = true;
    return true;
  }

  Status waitOn(Stream &consumer) override {
    if (!failed.isOk())
      return failed;
    if (kind == Kind::Send && !pending) {
      // The source may be overwritten once it has been copied out.
      consumer.wait(*copiedOut);
      return Status::ok();
    }
    while (!test())
      std::this_thread::yield();
    if (!failed.isOk())
      return failed;
    if (kind == Kind::Send)
      consumer.wait(*copiedOut);
    else
      consumer.wait(*copiedBack);
    return Status::ok();
  }

private:
  DevicePtr host() const { return DevicePtr(staging, device.getType()); }

  StagedCommunicator &comm;
  Kind kind;
  DevicePtr device;
  int64_t count;
  Stream &stream;
  std::function<std::unique_ptr<Request>(DevicePtr)> post;
  int64_t bytes;
  DevicePtr back;
  int64_t backBytes, backOffset;
  void *staging = nullptr;
  std::unique_ptr<Event> copiedOut, copiedBack;
  std::unique_ptr<Request> pending;
  bool done = false;
  Status failed;
};

} // namespace

std::unique_ptr<Request> StagedCommunicator::sendAsync(DevicePtr data,
                                                       int64_t count, int peer,
                                                       int tag,
                                                       Stream &stream) {
  return stagePointToPoint(true, data, count, peer, tag, stream);
}

std::unique_ptr<Request> StagedCommunicator::recvAsync(DevicePtr data,
                                                       int64_t count, int peer,
                                                       int tag,
                                                       Stream &stream) {
  return stagePointToPoint(false, data, count, peer, tag, stream);
}

std::unique_ptr<Request>
StagedCommunicator::stagePointToPoint(bool send, DevicePtr data, int64_t count,
                                      int peer, int tag, Stream &stream) {
  auto kind = send ? StagedRequest::Kind::Send : StagedRequest::Kind::Receive;
  return std::make_unique<StagedRequest>(
      *this, kind, data, count, stream,
      [this, send, count, peer, tag](DevicePtr staged) {
        return send ? host.sendAsync(staged, count, peer, tag, hostStream)
                    : host.recvAsync(staged, count, peer, tag, hostStream);
      });
}

std::unique_ptr<Request>
StagedCommunicator::broadcastAsync(DevicePtr data, int64_t count, int root,
                                   int channel, Stream &stream) {
  return std::make_unique<StagedRequest>(
      *this, StagedRequest::Kind::Collective, data, count, stream,
      [this, count, root, channel](DevicePtr staged) {
        return host.broadcastAsync(staged, count, root, channel, hostStream);
      });
}

std::unique_ptr<Request> StagedCommunicator::allReduceAsync(DevicePtr data,
                                                            int64_t count,
                                                            Reduction reduction,
                                                            int channel,
                                                            Stream &stream) {
  return std::make_unique<StagedRequest>(
      *this, StagedRequest::Kind::Collective, data, count, stream,
      [this, count, reduction, channel](DevicePtr staged) {
        return host.allReduceAsync(staged, count, reduction, channel,
                                   hostStream);
      });
}

std::unique_ptr<Request>
StagedCommunicator::reduceSumAsync(DevicePtr data, int64_t count, int root,
                                   int channel, Stream &stream) {
  return std::make_unique<StagedRequest>(
      *this, StagedRequest::Kind::Collective, data, count, stream,
      [this, count, root, channel](DevicePtr staged) {
        return host.reduceSumAsync(staged, count, root, channel, hostStream);
      });
}

} // namespace sluice::rt::cuda

namespace sluice::rt::cuda {

std::unique_ptr<Request>
StagedCommunicator::reduceScatterAsync(DevicePtr data, DevicePtr out,
                                       const std::vector<int64_t> &counts,
                                       int channel, Stream &stream) {
  int64_t total = 0, mine = counts[size_t(rank())];
  for (int64_t c : counts)
    total += c;
  // Staged: the whole buffer out, this rank's sum into the staging
  // buffer's tail, and that back into `out`.
  return std::make_unique<StagedRequest>(
      *this, StagedRequest::Kind::Collective, data, total, stream,
      [this, counts, total, channel](DevicePtr staged) {
        return host.reduceScatterAsync(staged, staged + total, counts, channel,
                                       hostStream);
      },
      /*extra=*/mine, out, mine, /*backOffset=*/total);
}

std::unique_ptr<Request> StagedCommunicator::allToAllAsync(
    DevicePtr send, const std::vector<int64_t> &sendCounts, DevicePtr recv,
    const std::vector<int64_t> &recvCounts, int channel, Stream &stream) {
  int64_t sent = 0, received = 0;
  for (int64_t c : sendCounts)
    sent += c;
  for (int64_t c : recvCounts)
    received += c;
  // Staged: the send buffer out, the host's all-to-all into the staging
  // buffer's tail, and that back into `recv`.
  return std::make_unique<StagedRequest>(
      *this, StagedRequest::Kind::Collective, send, sent, stream,
      [this, sendCounts, recvCounts, sent, channel](DevicePtr staged) {
        return host.allToAllAsync(staged, sendCounts, staged + sent,
                                  recvCounts, channel, hostStream);
      },
      /*extra=*/received, recv, received, /*backOffset=*/sent);
}

std::unique_ptr<Request>
StagedCommunicator::allGatherAsync(DevicePtr data,
                                   const std::vector<int64_t> &counts,
                                   int channel, Stream &stream) {
  int64_t total = 0;
  for (int64_t c : counts)
    total += c;
  return std::make_unique<StagedRequest>(
      *this, StagedRequest::Kind::Collective, data, total, stream,
      [this, counts, channel](DevicePtr staged) {
        return host.allGatherAsync(staged, counts, channel, hostStream);
      });
}

} // namespace sluice::rt::cuda
