//===- NcclCommunicator.cpp - NCCL between GPUs, bootstrapped by MPI ------===//

#include "NcclCommunicator.h"

#include "CudaCheck.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <set>
#include <tuple>

namespace sluice::rt::cuda {

namespace {
#define NCCL_CHECK(expr)                                                       \
  do {                                                                         \
    ncclResult_t sluiceNcclResult_ = (expr);                                   \
    if (sluiceNcclResult_ != ncclSuccess)                                      \
      return Status::error(std::string("NCCL error in " #expr ": ") +          \
                           ncclGetErrorString(sluiceNcclResult_));             \
  } while (0)

/// A failing NCCL call inside an asynchronous operation, for the sink.
void recordNccl(ErrorSink &errors, ncclResult_t result, const char *expression,
                const char *file, int line) {
  if (result == ncclSuccess)
    return;
  errors.check(
      cudaErrorUnknown,
      (std::string(expression) + " returned " + ncclGetErrorString(result))
          .c_str(),
      file, line);
}
#define NCCL_RECORD(expr)                                                      \
  recordNccl(device.getErrors(), (expr), #expr, __FILE__, __LINE__)

ncclDataType_t ncclType(DType type) {
  switch (type) {
  case DType::F32:
    return ncclFloat32;
  case DType::BF16:
    return ncclBfloat16;
  case DType::F64:
    return ncclFloat64;
  case DType::I32:
    return ncclInt32;
  }
  return ncclFloat32;
}

class NcclRequest final : public Request {
public:
  explicit NcclRequest(std::unique_ptr<Event> done) : done(std::move(done)) {}
  bool test() override { return true; }
  Status waitOn(Stream &stream) override {
    stream.wait(*done);
    return Status::ok();
  }

private:
  std::unique_ptr<Event> done;
};

/// A stream for one side of a link, wrapped for Stream::wait and events.
class LinkStream final : public Stream {
public:
  LinkStream(cudaStream_t handle, ErrorSink &errors)
      : handle(handle), errors(errors) {}
  ~LinkStream() override { cudaStreamDestroy(handle); }
  void wait(Event &event) override {
    SLUICE_CUDA_RECORD(
        errors, cudaStreamWaitEvent(handle, CudaDevice::getHandle(event), 0));
  }
  Status synchronize() override {
    SLUICE_CUDA_RECORD(errors, cudaStreamSynchronize(handle));
    return errors.take();
  }
  cudaStream_t handle;

private:
  ErrorSink &errors;
};
} // namespace

struct NcclCommunicator::Link {
  ncclComm_t comm = nullptr;
  int peerInLink = 0; // the other side's rank in the two-rank communicator
  std::unique_ptr<LinkStream> stream;
  ~Link() {
    if (comm)
      ncclCommDestroy(comm);
  }
};

NcclCommunicator::NcclCommunicator(MpiCommunicator &host, CudaDevice &device)
    : HostAssistedCommunicator(host, device) {}

std::vector<std::pair<int, int>> getLinks(const Plan &plan) {
  std::set<std::pair<int, int>> links;
  for (size_t d = 0; d < plan.programs.size(); ++d)
    for (const Instruction &instr : plan.programs[d].instructions)
      if (instr.op == Op::Send)
        links.insert({int(d), instr.peer});
  return {links.begin(), links.end()};
}

Status checkMessageOrder(const Plan &plan) {
  // Per link, the keys in the sender's order and in the receiver's.
  std::map<std::pair<int, int>, std::vector<int64_t>> sent, received;
  for (size_t d = 0; d < plan.programs.size(); ++d)
    for (const Instruction &instr : plan.programs[d].instructions) {
      if (instr.op == Op::Send)
        sent[{int(d), instr.peer}].push_back(instr.key);
      else if (instr.op == Op::Recv)
        received[{instr.peer, int(d)}].push_back(instr.key);
    }
  for (const auto &[link, keys] : sent) {
    const std::vector<int64_t> &other = received[link];
    for (size_t k = 0; k < keys.size() && k < other.size(); ++k)
      if (keys[k] != other[k])
        return Status::error(
            "device " + std::to_string(link.second) + " receives message " +
            std::to_string(other[k]) + " from device " +
            std::to_string(link.first) + " where that device sends message " +
            std::to_string(keys[k]) +
            ": NCCL matches messages by order, not by tag (use --transport "
            "mpi for this plan)");
  }
  return Status::ok();
}

Status NcclCommunicator::create(MpiCommunicator &host, CudaDevice &device,
                                const std::vector<std::pair<int, int>> &links,
                                std::unique_ptr<NcclCommunicator> &out) {
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(host, device));
  int me = host.rank();
  CUDA_CHECK(cudaSetDevice(device.getIndex()));
  // Links in the one global order every rank walks: the lowest unfinished
  // link always has both its ranks waiting on it, so this cannot deadlock.
  for (auto [from, to] : links) {
    if (me != from && me != to)
      continue;
    ncclUniqueId id;
    const int tag = host.maxTag();
    if (me == from) {
      NCCL_CHECK(ncclGetUniqueId(&id));
      if (MPI_Send(&id, sizeof(id), MPI_BYTE, to, tag, MPI_COMM_WORLD) !=
          MPI_SUCCESS)
        return Status::error("cannot send an NCCL id to rank " +
                             std::to_string(to));
    } else if (MPI_Recv(&id, sizeof(id), MPI_BYTE, from, tag, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      return Status::error("cannot receive an NCCL id from rank " +
                           std::to_string(from));
    }
    auto link = std::make_unique<Link>();
    NCCL_CHECK(ncclCommInitRank(&link->comm, 2, id, me == from ? 0 : 1));
    link->peerInLink = me == from ? 1 : 0;
    cudaStream_t handle;
    CUDA_CHECK(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking));
    link->stream = std::make_unique<LinkStream>(handle, device.getErrors());
    comm->links[{from, to}] = std::move(link);
  }
  for (void *&channel : comm->channels) {
    ncclUniqueId id;
    if (me == 0)
      NCCL_CHECK(ncclGetUniqueId(&id));
    if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
      return Status::error("cannot broadcast an NCCL id");
    ncclComm_t handle = nullptr;
    NCCL_CHECK(ncclCommInitRank(&handle, host.size(), id, me));
    channel = handle;
  }
  out = std::move(comm);
  return Status::ok();
}

NcclCommunicator::~NcclCommunicator() {
  links.clear();
  for (void *channel : channels)
    if (channel)
      ncclCommDestroy(static_cast<ncclComm_t>(channel));
}

template <class Op>
std::unique_ptr<Request> NcclCommunicator::enqueue(Stream &after, Stream &on,
                                                   Op &&op) {
  if (&after != &on) {
    std::unique_ptr<Event> ready = device.createEvent();
    ready->record(after);
    on.wait(*ready);
  }
  op(CudaDevice::getHandle(on));
  std::unique_ptr<Event> done = device.createEvent();
  done->record(on);
  return std::make_unique<NcclRequest>(std::move(done));
}

std::unique_ptr<Request> NcclCommunicator::sendAsync(DevicePtr data,
                                                     int64_t count, int peer,
                                                     int, Stream &stream) {
  auto it = links.find({rank(), peer});
  if (it == links.end()) {
    device.getErrors().check(
        cudaErrorInvalidValue,
        ("no NCCL link to rank " + std::to_string(peer)).c_str(), __FILE__,
        __LINE__);
    return std::make_unique<NcclRequest>(device.createEvent());
  }
  Link &link = *it->second;
  return enqueue(stream, *link.stream, [&](cudaStream_t s) {
    NCCL_RECORD(ncclSend(data.get(), size_t(count), ncclType(data.getType()),
                         link.peerInLink, link.comm, s));
  });
}

std::unique_ptr<Request> NcclCommunicator::recvAsync(DevicePtr data,
                                                     int64_t count, int peer,
                                                     int, Stream &stream) {
  auto it = links.find({peer, rank()});
  if (it == links.end()) {
    device.getErrors().check(
        cudaErrorInvalidValue,
        ("no NCCL link from rank " + std::to_string(peer)).c_str(), __FILE__,
        __LINE__);
    return std::make_unique<NcclRequest>(device.createEvent());
  }
  Link &link = *it->second;
  return enqueue(stream, *link.stream, [&](cudaStream_t s) {
    NCCL_RECORD(ncclRecv(data.get(), size_t(count), ncclType(data.getType()),
                         link.peerInLink, link.comm, s));
  });
}

std::unique_ptr<Request> NcclCommunicator::broadcastAsync(DevicePtr data,
                                                          int64_t count,
                                                          int root, int channel,
                                                          Stream &stream) {
  auto comm = static_cast<ncclComm_t>(channels[channel]);
  return enqueue(stream, stream, [&](cudaStream_t s) {
    NCCL_RECORD(ncclBroadcast(data.get(), data.get(), size_t(count),
                              ncclType(data.getType()), root, comm, s));
  });
}

std::unique_ptr<Request> NcclCommunicator::allReduceAsync(DevicePtr data,
                                                          int64_t count,
                                                          Reduction reduction,
                                                          int channel,
                                                          Stream &stream) {
  auto comm = static_cast<ncclComm_t>(channels[channel]);
  ncclRedOp_t op = reduction == Reduction::Max ? ncclMax : ncclSum;
  return enqueue(stream, stream, [&](cudaStream_t s) {
    NCCL_RECORD(ncclAllReduce(data.get(), data.get(), size_t(count),
                              ncclType(data.getType()), op, comm, s));
  });
}

std::unique_ptr<Request> NcclCommunicator::reduceSumAsync(DevicePtr data,
                                                          int64_t count,
                                                          int root, int channel,
                                                          Stream &stream) {
  auto comm = static_cast<ncclComm_t>(channels[channel]);
  return enqueue(stream, stream, [&](cudaStream_t s) {
    NCCL_RECORD(ncclReduce(data.get(), data.get(), size_t(count),
                           ncclType(data.getType()), ncclSum, root, comm, s));
  });
}

void NcclCommunicator::abort(int code) {
  // Unblock NCCL kernels waiting for a peer that will never come.
  for (auto &[key, link] : links)
    ncclCommAbort(link->comm), link->comm = nullptr;
  for (void *&channel : channels)
    if (channel)
      ncclCommAbort(static_cast<ncclComm_t>(channel)), channel = nullptr;
  host.abort(code);
}

} // namespace sluice::rt::cuda
