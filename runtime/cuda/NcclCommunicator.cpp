//===- NcclCommunicator.cpp - NCCL between GPUs, bootstrapped by MPI ------===//

#include "NcclCommunicator.h"

#include "CudaCheck.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

namespace sluice::rt::cuda {

namespace {
using Clock = std::chrono::steady_clock;
/// Operations this process has issued on any communicator.
int64_t issuedOnRank = 0;
double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

ncclComm_t handle(const NcclComm &comm) {
  return static_cast<ncclComm_t>(comm.handle);
}

/// Indexed by DType: F32, BF16, F64, I32.
ncclDataType_t ncclType(DType type) {
  constexpr ncclDataType_t kTypes[] = {ncclFloat32, ncclBfloat16, ncclFloat64,
                                       ncclInt32};
  static_assert(std::size(kTypes) == kNumDTypes);
  return kTypes[int(type)];
}


/// NCCL's request: complete for the host once enqueued; a consumer waits
/// for the event recorded after the operation.
class NcclRequest final : public Request {
public:
  explicit NcclRequest(std::shared_ptr<Event> done) : done(std::move(done)) {}
  bool test() override { return true; }
  Status waitOn(Stream &stream) override {
    if (done)
      stream.wait(*done);
    return Status::ok();
  }

private:
  std::shared_ptr<Event> done;
};

} // namespace

std::vector<std::string> getNcclCommunicatorNames(const Plan &plan,
                                                  const MeshPosition &at) {
  std::vector<std::string> names = {"world"};
  for (const CommSpec &spec : getCommLayout(plan, at))
    if (spec.color >= 0)
      names.push_back(spec.name);
  return names;
}

//===----------------------------------------------------------------------===//
// NcclCommunicator
//===----------------------------------------------------------------------===//

NcclComm *NcclCommunicator::commFor(Stream &stream, const char *what) {
  NcclComm *fallback = nullptr;
  int comms = 0;
  for (int k = 0; k < kStreamKinds; ++k) {
    if (!streamComms[k])
      continue;
    if (&device.getStream(StreamKind(k)) == &stream)
      return streamComms[k];
    fallback = streamComms[k];
    ++comms;
  }
  // A group with one communicator takes its operations on any stream (a
  // device's replicas: gradient sums on the data stream, ZeRO-1's
  // all-gathers on the compute stream). With several, a stream none is
  // for is a mistake: picking one would put the operation among another
  // stream's.
  if (comms == 1)
    return fallback;
  device.getErrors().check(
      cudaErrorInvalidValue,
      (std::string("NCCL: this group has no communicator for ") + what)
          .c_str(),
      __FILE__, __LINE__);
  return nullptr;
}

template <class Op>
std::unique_ptr<Request>
NcclCommunicator::enqueue(NcclComm *comm, Stream &after, Stream &on,
                          const std::string &kind, Op &&op) {
  std::string what = next.empty() ? kind : kind + " (" + next + ")";
  next.clear();
  if (&after != &on) {
    std::unique_ptr<Event> ready = device.createEvent();
    ready->record(after);
    on.wait(*ready);
  }
  std::shared_ptr<Event> done = device.createEvent();
  if (!comm) {
    done->record(on);
    return std::make_unique<NcclRequest>(std::move(done));
  }
  ncclResult_t result =
      op(static_cast<ncclComm_t>(comm->handle), CudaDevice::getHandle(on));
  if (grouping) {
    // Inside ncclGroupStart the call only records the operation; NCCL
    // launches the group at ncclGroupEnd, so its progress is settled and
    // the event after it recorded there (endGroup), not now.
    checkResult(result, *comm, what, /*inGroup=*/true);
    grouped.push_back({comm, &on, what, done});
  } else {
    checkResult(result, *comm, what, /*inGroup=*/false);
    noteIssued(*comm, what, done, on);
  }
  return std::make_unique<NcclRequest>(std::move(done));
}

void NcclCommunicator::checkResult(int code, NcclComm &comm,
                                   const std::string &what, bool inGroup) {
  // An int in the header, which does not include nccl.h.
  auto result = ncclResult_t(code);
  Status st = Status::ok();
  if (result == ncclInProgress) {
    if (!inGroup)
      st = mesh.settle(comm, what);
  } else if (result != ncclSuccess) {
    st = Status::error(
        what + " on communicator '" + comm.name +
        "': " + ncclGetErrorString(result) + " (" +
        ncclGetLastError(static_cast<ncclComm_t>(comm.handle)) + ")");
  }
  if (!st)
    device.getErrors().check(cudaErrorUnknown, st.message().c_str(), __FILE__,
                             __LINE__);
}

void NcclCommunicator::noteIssued(NcclComm &comm, const std::string &what,
                                  const std::shared_ptr<Event> &done,
                                  Stream &on) {
  done->record(on);
  comm.recent.push_back({what, ++comm.issued, ++issuedOnRank, done});
  // Enough to name what a stuck rank waits in; older ones are done.
  while (comm.recent.size() > 256)
    comm.recent.pop_front();
}

void NcclCommunicator::startGroup() {
  ncclGroupStart();
  grouping = true;
}

Status NcclCommunicator::endGroup() {
  grouping = false;
  ncclResult_t result = ncclGroupEnd();
  std::vector<Grouped> members = std::move(grouped);
  grouped.clear();
  if (members.empty())
    return Status::ok();
  checkResult(result, *members.front().comm,
              "a group of " + std::to_string(members.size()) +
                  " operations, the first " + members.front().what,
              /*inGroup=*/false);
  for (Grouped &member : members)
    noteIssued(*member.comm, member.what, member.done, *member.on);
  return Status::ok();
}

std::unique_ptr<Request> NcclCommunicator::sendAsync(DevicePtr data,
                                                     int64_t count, int peer,
                                                     int, Stream &stream) {
  std::string kind = "send of " + std::to_string(count) + " " +
                     getName(data.getType()) + " to rank " +
                     std::to_string(peer);
  return enqueue(commFor(stream, "sends"), stream, stream, kind,
                 [&](ncclComm_t c, cudaStream_t s) {
                   return ncclSend(data.get(), size_t(count),
                                   ncclType(data.getType()), peer, c, s);
                 });
}

std::unique_ptr<Request> NcclCommunicator::recvAsync(DevicePtr data,
                                                     int64_t count, int peer,
                                                     int, Stream &stream) {
  std::string kind = "receive of " + std::to_string(count) + " " +
                     getName(data.getType()) + " from rank " +
                     std::to_string(peer);
  return enqueue(commFor(stream, "receives"), stream, stream, kind,
                 [&](ncclComm_t c, cudaStream_t s) {
                   return ncclRecv(data.get(), size_t(count),
                                   ncclType(data.getType()), peer, c, s);
                 });
}

std::unique_ptr<Request> NcclCommunicator::broadcastAsync(DevicePtr data,
                                                          int64_t count,
                                                          int root, int,
                                                          Stream &stream) {
  std::string kind = "broadcast of " + std::to_string(count) + " " +
                     getName(data.getType()) + " from rank " +
                     std::to_string(root);
  return enqueue(commFor(stream, "broadcasts"), stream, stream, kind,
                 [&](ncclComm_t c, cudaStream_t s) {
                   return ncclBroadcast(data.get(), data.get(), size_t(count),
                                        ncclType(data.getType()), root, c, s);
                 });
}

std::unique_ptr<Request> NcclCommunicator::allReduceAsync(DevicePtr data,
                                                          int64_t count,
                                                          Reduction reduction,
                                                          int,
                                                          Stream &stream) {
  std::string kind = std::string("all-reduce (") +
                     (reduction == Reduction::Max ? "max" : "sum") + ") of " +
                     std::to_string(count) + " " + getName(data.getType());
  ncclRedOp_t op = reduction == Reduction::Max ? ncclMax : ncclSum;
  return enqueue(commFor(stream, "all-reduces"), stream, stream, kind,
                 [&](ncclComm_t c, cudaStream_t s) {
                   return ncclAllReduce(data.get(), data.get(), size_t(count),
                                        ncclType(data.getType()), op, c, s);
                 });
}

std::unique_ptr<Request> NcclCommunicator::reduceSumAsync(DevicePtr data,
                                                          int64_t count,
                                                          int root, int,
                                                          Stream &stream) {
  std::string kind = "reduce of " + std::to_string(count) + " " +
                     getName(data.getType()) + " onto rank " +
                     std::to_string(root);
  return enqueue(commFor(stream, "reduces"), stream, stream, kind,
                 [&](ncclComm_t c, cudaStream_t s) {
                   return ncclReduce(data.get(), data.get(), size_t(count),
                                     ncclType(data.getType()), ncclSum, root,
                                     c, s);
                 });
}

namespace {
bool allEqual(const std::vector<int64_t> &counts) {
  for (int64_t c : counts)
    if (c != counts.front())
      return false;
  return true;
}
} // namespace

std::unique_ptr<Request>
NcclCommunicator::reduceScatterAsync(DevicePtr data, DevicePtr out,
                                     const std::vector<int64_t> &counts, int,
                                     Stream &stream) {
  int64_t total = 0;
  for (int64_t c : counts)
    total += c;
  std::string kind = "reduce-scatter of " + std::to_string(total) + " " +
                     getName(data.getType());
  ncclDataType_t type = ncclType(data.getType());
  int me = rank();
  return enqueue(
      commFor(stream, "reduce-scatters"), stream, stream, kind,
      [&](ncclComm_t c, cudaStream_t s) {
        if (allEqual(counts))
          return ncclReduceScatter(data.get(), out.get(), size_t(counts[0]),
                                   type, ncclSum, c, s);
        // ZeRO-1's uneven parts (the last replicas hold fewer elements):
        // a reduce onto each part's owner, in one group.
        ncclGroupStart();
        int64_t at = 0;
        for (size_t r = 0; r < counts.size(); ++r) {
          if (counts[r] > 0) {
            DevicePtr part = data + at;
            ncclReduce(part.get(), int(r) == me ? out.get() : part.get(),
                       size_t(counts[r]), type, ncclSum, int(r), c, s);
          }
          at += counts[r];
        }
        return ncclGroupEnd();
      });
}

std::unique_ptr<Request>
NcclCommunicator::allGatherAsync(DevicePtr data,
                                 const std::vector<int64_t> &counts, int,
                                 Stream &stream) {
  int64_t total = 0;
  for (int64_t c : counts)
    total += c;
  std::string kind = "all-gather of " + std::to_string(total) + " " +
                     getName(data.getType());
  ncclDataType_t type = ncclType(data.getType());
  int me = rank();
  return enqueue(
      commFor(stream, "all-gathers"), stream, stream, kind,
      [&](ncclComm_t c, cudaStream_t s) {
        if (allEqual(counts))
          return ncclAllGather((data + me * counts[0]).get(), data.get(),
                               size_t(counts[0]), type, c, s);
        ncclGroupStart();
        int64_t at = 0;
        for (size_t r = 0; r < counts.size(); ++r) {
          if (counts[r] > 0) {
            DevicePtr part = data + at;
            ncclBroadcast(part.get(), part.get(), size_t(counts[r]), type,
                          int(r), c, s);
          }
          at += counts[r];
        }
        return ncclGroupEnd();
      });
}

std::unique_ptr<Request> NcclCommunicator::allToAllAsync(
    DevicePtr send, const std::vector<int64_t> &sendCounts, DevicePtr recv,
    const std::vector<int64_t> &recvCounts, int, Stream &stream) {
  int64_t total = 0;
  for (int64_t c : sendCounts)
    total += c;
  std::string kind = "all-to-all of " + std::to_string(total) + " " +
                     getName(send.getType()) + " sent";
  ncclDataType_t type = ncclType(send.getType());
  return enqueue(
      commFor(stream, "all-to-alls"), stream, stream, kind,
      [&](ncclComm_t c, cudaStream_t s) {
        // One group of a send and a receive per peer, itself included
        // (NCCL 2.7+): NCCL runs them together.
        ncclGroupStart();
        int64_t out = 0, in = 0;
        for (size_t r = 0; r < sendCounts.size(); ++r) {
          if (sendCounts[r] > 0)
            ncclSend((send + out).get(), size_t(sendCounts[r]), type, int(r),
                     c, s);
          if (recvCounts[r] > 0)
            ncclRecv((recv + in).get(), size_t(recvCounts[r]), type, int(r),
                     c, s);
          out += sendCounts[r];
          in += recvCounts[r];
        }
        return ncclGroupEnd();
      });
}

Status NcclCommunicator::allReduceSum(DevicePtr data, int64_t count,
                                      const int *group, int groupSize,
                                      Stream &stream) {
  std::vector<int> members(group, group + groupSize);
  auto it = groupComms.find(members);
  if (it == groupComms.end()) {
    std::string list;
    for (int m : members)
      list += (list.empty() ? "" : ", ") + std::to_string(m);
    return Status::error("NCCL: no communicator was made for the group of "
                         "ranks " +
                         list);
  }
  std::string kind = "group sum of " + std::to_string(count) + " " +
                     getName(data.getType());
  enqueue(it->second, stream, stream, kind,
          [&](ncclComm_t c, cudaStream_t s) {
            return ncclAllReduce(data.get(), data.get(), size_t(count),
                                 ncclType(data.getType()), ncclSum, c, s);
          });
  return Status::ok();
}

void NcclCommunicator::abort(int code) {
  mesh.abortAll();
  host.abort(code);
}

//===----------------------------------------------------------------------===//
// NcclMesh
//===----------------------------------------------------------------------===//

Status NcclMesh::settle(NcclComm &comm, const std::string &what) {
  auto start = Clock::now();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t queried = ncclCommGetAsyncError(handle(comm), &state);
    if (queried != ncclSuccess)
      state = queried;
    if (state == ncclSuccess)
      return Status::ok();
    if (state != ncclInProgress)
      return Status::error(where + ": " + what + " on communicator '" +
                           comm.name + "': " + ncclGetErrorString(state) +
                           " (" + ncclGetLastError(handle(comm)) + ")");
    if (since(start) > settings.timeoutSeconds)
      return Status::error(
          where + ": " + what + " on communicator '" + comm.name +
          "' did not finish within " +
          std::to_string(int64_t(settings.timeoutSeconds)) +
          " s (--comm-timeout): a rank failed or never joined, or NCCL cannot "
          "reach it (docs/gpu.md: NCCL_SOCKET_IFNAME, NCCL_IB_HCA)");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Status NcclMesh::initWorld(HostGroup &host) {
  ncclUniqueId id{};
  int ok = 1;
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
    ok = 0;
  // Every rank learns whether rank 0 has an id: none waits for a missing
  // one.
  if (!host.broadcastBytes(&ok, sizeof(ok), 0) ||
      !host.broadcastBytes(&id, sizeof(id), 0))
    return Status::error(where + ": cannot broadcast the NCCL id to the "
                         "job's ranks");
  if (!ok)
    return Status::error("rank 0 cannot make an NCCL id (ncclGetUniqueId): "
                         "no usable network interface for NCCL's bootstrap "
                         "(NCCL_SOCKET_IFNAME)");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t result =
      ncclCommInitRankConfig(&comm, host.size(), id, rank, &config);
  if (result != ncclSuccess && result != ncclInProgress)
    return Status::error(where + ": ncclCommInitRankConfig: " +
                         ncclGetErrorString(result));
  world = comm;
  comms.push_back(std::make_unique<NcclComm>("world", comm));
  return settle(*comms.back(), "initialising");
}

Status NcclMesh::split(const std::string &name, int color, int key,
                       NcclComm *&out) {
  out = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t child = nullptr;
  ncclResult_t result =
      ncclCommSplit(static_cast<ncclComm_t>(world),
                    color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child,
                    &config);
  if (result != ncclSuccess && result != ncclInProgress)
    return Status::error(where + ": splitting communicator '" + name +
                         "': " + ncclGetErrorString(result));
  if (Status st = settle(*comms.front(), "splitting '" + name + "' from");
      !st)
    return st;
  if (!child)
    return Status::ok();
  comms.push_back(std::make_unique<NcclComm>(name, child));
  out = comms.back().get();
  return settle(*out, "initialising");
}

Status NcclMesh::create(HostGroup &host, CudaDevice &device,
                        const Plan &plan, const MeshPosition &at,
                        HostGroup *hosts[kMeshGroups],
                        const NcclSettings &settings,
                        std::unique_ptr<NcclMesh> &out) {
  std::unique_ptr<NcclMesh> mesh(new NcclMesh());
  mesh->rank = host.rank();
  mesh->settings = settings;
  mesh->device = &device;
  mesh->where = "rank " + std::to_string(mesh->rank) + " (device " +
                std::to_string(at.device) +
                (plan.dp > 1 ? ", replica " + std::to_string(at.replica) : "") +
                (plan.tp > 1 ? ", shard " + std::to_string(at.shard) : "") +
                ")";
  ncclGetVersion(&mesh->version);
  // NCCL 2.26 and later keep the host's launch order across communicators
  // on the GPU, so the global order cannot be undone by the hardware
  // running one communicator's kernel ahead of another's. A setting the
  // user made stands.
  if (mesh->version >= 22600)
    setenv("NCCL_LAUNCH_ORDER_IMPLICIT", "1", /*overwrite=*/0);
  CUDA_CHECK(cudaSetDevice(device.getIndex()));
  if (Status st = mesh->initWorld(host); !st)
    return st;

  for (int g = 0; g < kMeshGroups; ++g)
    if (hosts[g])
      mesh->groups[g] =
          std::make_unique<NcclCommunicator>(*hosts[g], device, *mesh);
  // Every rank makes the same splits in the same order: each is
  // collective over the world.
  for (const CommSpec &spec : getCommLayout(plan, at)) {
    NcclComm *comm = nullptr;
    if (Status st = mesh->split(spec.name, spec.color, spec.key, comm); !st)
      return st;
    NcclCommunicator *group = mesh->groups[int(spec.group)].get();
    if (!comm || !group)
      continue;
    if (spec.stream)
      group->setStreamComm(*spec.stream, comm);
    else
      group->setGroupComm(spec.members, comm);
  }
  out = std::move(mesh);
  return Status::ok();
}

std::string NcclMesh::describePending() {
  const NcclComm *oldest = nullptr;
  const NcclComm::Issued *op = nullptr;
  for (const std::unique_ptr<NcclComm> &comm : comms)
    for (const NcclComm::Issued &issued : comm->recent)
      if (!issued.done->isComplete()) {
        // Communicators are independent sequences: the first pending one
        // of each, and of those the one issued earliest on its own.
        if (!op || issued.sequence < op->sequence) {
          oldest = comm.get();
          op = &issued;
        }
        break;
      }
  if (!op)
    return "its own GPU work (no NCCL operation is pending)";
  return op->what + " on communicator '" + oldest->name + "' (operation " +
         std::to_string(op->index) + " there)";
}

Status NcclMesh::check(double waited) {
  for (const std::unique_ptr<NcclComm> &comm : comms) {
    if (!comm->handle)
      continue;
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(handle(*comm), &state) != ncclSuccess)
      continue;
    if (state != ncclSuccess && state != ncclInProgress)
      return Status::error(where + ": NCCL reports '" +
                           ncclGetErrorString(state) + "' on communicator '" +
                           comm->name + "' (" +
                           ncclGetLastError(handle(*comm)) +
                           ") while waiting for " + describePending());
  }
  if (waited > settings.timeoutSeconds)
    return Status::error(
        where + ": no progress for " +
        std::to_string(int64_t(settings.timeoutSeconds)) +
        " s (--comm-timeout) waiting for " + describePending() +
        "; a peer has failed or never joined it");
  return Status::ok();
}

void NcclMesh::abortAll() {
  if (aborted)
    return;
  aborted = true;
  // Children first; an abort ends the kernels waiting for peers.
  for (auto it = comms.rbegin(); it != comms.rend(); ++it)
    if ((*it)->handle) {
      ncclCommAbort(handle(**it));
      (*it)->handle = nullptr;
    }
}

NcclMesh::~NcclMesh() {
  if (aborted)
    return;
  // Finalize flushes what is left; a communicator that cannot (a peer gone)
  // is aborted instead of waited for.
  bool stuck = false;
  settings.timeoutSeconds = std::min(settings.timeoutSeconds, 30.0);
  for (const std::unique_ptr<NcclComm> &comm : comms) {
    ncclCommFinalize(handle(*comm));
    if (!settle(*comm, "finalizing"))
      stuck = true;
  }
  if (stuck) {
    abortAll();
    return;
  }
  for (auto it = comms.rbegin(); it != comms.rend(); ++it)
    ncclCommDestroy(handle(**it));
}

} // namespace sluice::rt::cuda
