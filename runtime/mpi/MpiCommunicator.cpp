//===- MpiCommunicator.cpp - Communication over MPI -----------------------===//

#include "MpiCommunicator.h"

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace sluice::rt {

namespace {
/// Checks an MPI call and turns a failure into a Status naming the call.
#define MPI_CHECK(expr)                                                        \
  do {                                                                         \
    int sluiceMpiError_ = (expr);                                              \
    if (sluiceMpiError_ != MPI_SUCCESS) {                                      \
      char text_[MPI_MAX_ERROR_STRING];                                        \
      int length_ = 0;                                                         \
      MPI_Error_string(sluiceMpiError_, text_, &length_);                      \
      return Status::error(std::string("MPI error in " #expr ": ") +           \
                           std::string(text_, length_));                       \
    }                                                                          \
  } while (0)

class MpiRequest final : public Request {
public:
  ~MpiRequest() override {
    // A request destroyed before completion (an aborting run) is left to
    // MPI_Finalize/abort; waiting here could hang.
  }
  bool test() override {
    if (done)
      return true;
    int flag = 0;
    MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
    done = flag != 0;
    return done;
  }
  Status waitOn(Stream &) override {
    // Host memory: the data is there once MPI says so; polling (not
    // MPI_Wait) keeps the rank yielding its core to the others.
    while (!test())
      std::this_thread::yield();
    return Status::ok();
  }
  MPI_Request request = MPI_REQUEST_NULL;
  bool done = false;
  /// The count and displacement arrays of a v-collective, which must
  /// outlive it (an all-to-all's receive side in the second pair).
  std::vector<int> counts, displacements, recvCounts, recvDisplacements;
};

/// MPI's int counts and displacements of consecutive parts.
void setParts(const std::vector<int64_t> &parts, std::vector<int> &counts,
              std::vector<int> &displacements) {
  int at = 0;
  for (int64_t count : parts) {
    counts.push_back(int(count));
    displacements.push_back(at);
    at += int(count);
  }
}

/// Indexed by DType: F32, BF16 (summed by bf16SumOp), F64, I32.
MPI_Datatype mpiType(DType type) {
  const MPI_Datatype types[] = {MPI_FLOAT, MPI_UINT16_T, MPI_DOUBLE, MPI_INT};
  static_assert(std::size(types) == kNumDTypes);
  return types[int(type)];
}

void bf16SumOp(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<uint16_t *>(in), *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = floatToBf16(bf16ToFloat(a[i]) + bf16ToFloat(b[i]));
}

void bf16MaxOp(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<uint16_t *>(in), *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    if (bf16ToFloat(a[i]) > bf16ToFloat(b[i]))
      b[i] = a[i];
}

MPI_Comm channelComm(void *const *channels, int channel) {
  return *static_cast<MPI_Comm *>(channels[channel]);
}
} // namespace

MpiCommunicator::MpiCommunicator() : MpiCommunicator(nullptr) {}

MpiCommunicator::MpiCommunicator(void *owned) : base(owned) {
  if (!base) {
    auto *world = new MPI_Comm;
    *world = MPI_COMM_WORLD;
    base = world;
  }
  MPI_Comm all = *static_cast<MPI_Comm *>(base);
  MPI_Comm_rank(all, &worldRank);
  MPI_Comm_size(all, &worldSize);
  void *value = nullptr;
  int found = 0;
  // The tag bound is an attribute of MPI_COMM_WORLD only.
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
  if (found && value)
    tagUpperBound = *static_cast<int *>(value);
  // Collective: every rank constructs its communicator at start-up.
  for (void *&channel : channels) {
    auto *comm = new MPI_Comm;
    MPI_Comm_dup(all, comm);
    channel = comm;
  }
  auto *sum = new MPI_Op, *max = new MPI_Op;
  MPI_Op_create(&bf16SumOp, /*commute=*/1, sum);
  MPI_Op_create(&bf16MaxOp, /*commute=*/1, max);
  bf16Sum = sum;
  bf16Max = max;
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int color, int key) {
  auto *part = new MPI_Comm;
  MPI_Comm_split(MPI_COMM_WORLD, color < 0 ? MPI_UNDEFINED : color, key,
                 part);
  if (*part == MPI_COMM_NULL) {
    delete part;
    return nullptr;
  }
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(part));
}

MpiCommunicator::~MpiCommunicator() {
  // The handles themselves go with MPI_Finalize.
  for (void *channel : channels)
    delete static_cast<MPI_Comm *>(channel);
  delete static_cast<MPI_Comm *>(base);
  delete static_cast<MPI_Op *>(bf16Sum);
  delete static_cast<MPI_Op *>(bf16Max);
}

namespace {
MPI_Op reductionOp(Reduction reduction, DType type, void *bf16Sum,
                   void *bf16Max) {
  if (type == DType::BF16)
    return *static_cast<MPI_Op *>(reduction == Reduction::Max ? bf16Max
                                                              : bf16Sum);
  return reduction == Reduction::Max ? MPI_MAX : MPI_SUM;
}
} // namespace

std::unique_ptr<Request> MpiCommunicator::broadcastAsync(DevicePtr data,
                                                         int64_t count,
                                                         int root, int channel,
                                                         Stream &) {
  auto request = std::make_unique<MpiRequest>();
  MPI_Ibcast(data.get(), int(count), mpiType(data.getType()), root,
             channelComm(channels, channel), &request->request);
  return request;
}

std::unique_ptr<Request>
MpiCommunicator::allReduceAsync(DevicePtr data, int64_t count,
                                Reduction reduction, int channel, Stream &) {
  auto request = std::make_unique<MpiRequest>();
  MPI_Iallreduce(MPI_IN_PLACE, data.get(), int(count), mpiType(data.getType()),
                 reductionOp(reduction, data.getType(), bf16Sum, bf16Max),
                 channelComm(channels, channel), &request->request);
  return request;
}

std::unique_ptr<Request> MpiCommunicator::reduceSumAsync(DevicePtr data,
                                                         int64_t count,
                                                         int root, int channel,
                                                         Stream &) {
  auto request = std::make_unique<MpiRequest>();
  MPI_Datatype type = mpiType(data.getType());
  MPI_Op op = reductionOp(Reduction::Sum, data.getType(), bf16Sum, bf16Max);
  if (worldRank == root)
    MPI_Ireduce(MPI_IN_PLACE, data.get(), int(count), type, op, root,
                channelComm(channels, channel), &request->request);
  else
    MPI_Ireduce(data.get(), nullptr, int(count), type, op, root,
                channelComm(channels, channel), &request->request);
  return request;
}

std::unique_ptr<Request>
MpiCommunicator::reduceScatterAsync(DevicePtr data, DevicePtr out,
                                    const std::vector<int64_t> &counts,
                                    int channel, Stream &) {
  auto request = std::make_unique<MpiRequest>();
  request->counts.assign(counts.begin(), counts.end());
  MPI_Ireduce_scatter(data.get(), out.get(), request->counts.data(),
                      mpiType(data.getType()),
                      reductionOp(Reduction::Sum, data.getType(), bf16Sum,
                                  bf16Max),
                      channelComm(channels, channel), &request->request);
  return request;
}

std::unique_ptr<Request>
MpiCommunicator::allGatherAsync(DevicePtr data,
                                const std::vector<int64_t> &counts,
                                int channel, Stream &) {
  auto request = std::make_unique<MpiRequest>();
  int at = 0;
  for (int64_t count : counts) {
    request->counts.push_back(int(count));
    request->displacements.push_back(at);
    at += int(count);
  }
  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data.get(),
                  request->counts.data(), request->displacements.data(),
                  mpiType(data.getType()), channelComm(channels, channel),
                  &request->request);
  return request;
}

std::unique_ptr<Request> MpiCommunicator::allToAllAsync(
    DevicePtr send, const std::vector<int64_t> &sendCounts, DevicePtr recv,
    const std::vector<int64_t> &recvCounts, int channel, Stream &) {
  auto request = std::make_unique<MpiRequest>();
  setParts(sendCounts, request->counts, request->displacements);
  setParts(recvCounts, request->recvCounts, request->recvDisplacements);
  MPI_Ialltoallv(send.get(), request->counts.data(),
                 request->displacements.data(), mpiType(send.getType()),
                 recv.get(), request->recvCounts.data(),
                 request->recvDisplacements.data(), mpiType(recv.getType()),
                 channelComm(channels, channel), &request->request);
  return request;
}

std::unique_ptr<Request> MpiCommunicator::sendAsync(DevicePtr data,
                                                    int64_t count, int peer,
                                                    int tag, Stream &) {
  auto request = std::make_unique<MpiRequest>();
  MPI_Isend(data.get(), int(count), mpiType(data.getType()), peer, tag,
            *static_cast<MPI_Comm *>(base), &request->request);
  return request;
}

std::unique_ptr<Request> MpiCommunicator::recvAsync(DevicePtr data,
                                                    int64_t count, int peer,
                                                    int tag, Stream &) {
  auto request = std::make_unique<MpiRequest>();
  MPI_Irecv(data.get(), int(count), mpiType(data.getType()), peer, tag,
            *static_cast<MPI_Comm *>(base), &request->request);
  return request;
}

Status MpiCommunicator::allReduceSum(DevicePtr data, int64_t count,
                                     const int *group, int groupSize,
                                     Stream &) {
  // Groups are tiny (the two ends of a tied embedding): reduce to the
  // first member and send the sum back, on the largest tag, which message
  // keys never reach. In place, in the data's own type.
  const int tag = tagUpperBound;
  int root = group[0];
  MPI_Datatype type = mpiType(data.getType());
  int64_t bytes = count * getSize(data.getType());
  if (worldRank == root) {
    std::vector<char> incoming(bytes);
    DevicePtr other(incoming.data(), data.getType());
    MPI_Op op = reductionOp(Reduction::Sum, data.getType(), bf16Sum, bf16Max);
    for (int i = 1; i < groupSize; ++i) {
      MPI_CHECK(MPI_Recv(incoming.data(), int(count), type, group[i], tag,
                         *static_cast<MPI_Comm *>(base), MPI_STATUS_IGNORE));
      MPI_CHECK(
          MPI_Reduce_local(other.get(), data.get(), int(count), type, op));
    }
    for (int i = 1; i < groupSize; ++i)
      MPI_CHECK(MPI_Send(data.get(), int(count), type, group[i], tag,
                         *static_cast<MPI_Comm *>(base)));
  } else {
    MPI_CHECK(
        MPI_Send(data.get(), int(count), type, root, tag, *static_cast<MPI_Comm *>(base)));
    MPI_CHECK(MPI_Recv(data.get(), int(count), type, root, tag, *static_cast<MPI_Comm *>(base),
                       MPI_STATUS_IGNORE));
  }
  return Status::ok();
}

Status MpiCommunicator::allReduceSum(double *data, int64_t n) {
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, int(n), MPI_DOUBLE, MPI_SUM,
                          *static_cast<MPI_Comm *>(base)));
  return Status::ok();
}

Status MpiCommunicator::allReduceMax(double *data, int64_t n) {
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, int(n), MPI_DOUBLE, MPI_MAX,
                          *static_cast<MPI_Comm *>(base)));
  return Status::ok();
}

Status MpiCommunicator::gatherToRoot(const std::string &mine,
                                     std::vector<std::string> &all) {
  int length = int(mine.size());
  std::vector<int> lengths(worldRank == 0 ? worldSize : 0);
  MPI_CHECK(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0,
                       *static_cast<MPI_Comm *>(base)));
  std::vector<int> offsets(lengths.size(), 0);
  int total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::vector<char> bytes(total);
  MPI_CHECK(MPI_Gatherv(mine.data(), length, MPI_CHAR, bytes.data(),
                        lengths.data(), offsets.data(), MPI_CHAR, 0,
                        *static_cast<MPI_Comm *>(base)));
  all.clear();
  for (size_t r = 0; r < lengths.size(); ++r)
    all.emplace_back(bytes.data() + offsets[r], lengths[r]);
  return Status::ok();
}

void MpiCommunicator::barrier() { MPI_Barrier(*static_cast<MPI_Comm *>(base)); }

std::unique_ptr<ProcessGroup> MpiCommunicator::splitByHost() {
  auto *node = new MPI_Comm;
  MPI_Comm_split_type(*static_cast<MPI_Comm *>(base), MPI_COMM_TYPE_SHARED,
                      worldRank, MPI_INFO_NULL, node);
  return std::unique_ptr<ProcessGroup>(new MpiCommunicator(node));
}

std::unique_ptr<ProcessGroup> MpiCommunicator::splitGroup(int color,
                                                          int key) {
  auto *part = new MPI_Comm;
  MPI_Comm_split(*static_cast<MPI_Comm *>(base), color, key, part);
  return std::unique_ptr<ProcessGroup>(new MpiCommunicator(part));
}

std::unique_ptr<HostGroup> MpiCommunicator::splitHostGroup(int color,
                                                          int key) {
  auto *part = new MPI_Comm;
  MPI_Comm_split(*static_cast<MPI_Comm *>(base),
                 color < 0 ? MPI_UNDEFINED : color, key, part);
  if (*part == MPI_COMM_NULL) {
    delete part;
    return nullptr;
  }
  return std::unique_ptr<HostGroup>(new MpiCommunicator(part));
}

Status MpiCommunicator::allReduceInts(int64_t *values, int count,
                                      Reduction reduction) {
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_INT64_T,
                          reduction == Reduction::Max ? MPI_MAX : MPI_SUM,
                          *static_cast<MPI_Comm *>(base)));
  return Status::ok();
}

Status MpiCommunicator::allGatherBytes(const void *mine, int64_t bytes,
                                       void *all) {
  MPI_CHECK(MPI_Allgather(mine, int(bytes), MPI_BYTE, all, int(bytes),
                          MPI_BYTE, *static_cast<MPI_Comm *>(base)));
  return Status::ok();
}

Status MpiCommunicator::broadcastBytes(void *data, int64_t bytes, int root) {
  MPI_CHECK(MPI_Bcast(data, int(bytes), MPI_BYTE, root,
                      *static_cast<MPI_Comm *>(base)));
  return Status::ok();
}

void MpiCommunicator::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort(); // MPI_Abort does not return; make that explicit.
}

} // namespace sluice::rt
