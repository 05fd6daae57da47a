//===- MpiCommunicator.cpp - Communication over MPI -----------------------===//

#include "MpiCommunicator.h"

#include <mpi.h>

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
  MpiRequest() = default;
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
    if (done)
      payload.clear();
    return done;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<float> payload; // a send's copy of the data
  bool done = false;
};
} // namespace

MpiCommunicator::MpiCommunicator() {
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  void *value = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
  if (found && value)
    tagUpperBound = *static_cast<int *>(value);
  // Collective: every rank constructs its communicator at start-up.
  for (void *&channel : channels) {
    auto *comm = new MPI_Comm;
    MPI_Comm_dup(MPI_COMM_WORLD, comm);
    channel = comm;
  }
}

namespace {
MPI_Comm channelComm(void *const *channels, int channel) {
  return *static_cast<MPI_Comm *>(channels[channel]);
}
} // namespace

std::unique_ptr<Request>
MpiCommunicator::broadcastAsync(float *data, int64_t n, int root, int channel) {
  auto request = std::make_unique<MpiRequest>();
  MPI_Ibcast(data, int(n), MPI_FLOAT, root, channelComm(channels, channel),
             &request->request);
  return request;
}

std::unique_ptr<Request> MpiCommunicator::allReduceAsync(float *data, int64_t n,
                                                         Reduction reduction,
                                                         int channel) {
  auto request = std::make_unique<MpiRequest>();
  MPI_Iallreduce(MPI_IN_PLACE, data, int(n), MPI_FLOAT,
                 reduction == Reduction::Max ? MPI_MAX : MPI_SUM,
                 channelComm(channels, channel), &request->request);
  return request;
}

std::unique_ptr<Request>
MpiCommunicator::reduceSumAsync(float *data, int64_t n, int root, int channel) {
  auto request = std::make_unique<MpiRequest>();
  if (worldRank == root)
    MPI_Ireduce(MPI_IN_PLACE, data, int(n), MPI_FLOAT, MPI_SUM, root,
                channelComm(channels, channel), &request->request);
  else
    MPI_Ireduce(data, nullptr, int(n), MPI_FLOAT, MPI_SUM, root,
                channelComm(channels, channel), &request->request);
  return request;
}

std::unique_ptr<Request>
MpiCommunicator::sendAsync(const float *data, int64_t n, int peer, int tag) {
  auto request = std::make_unique<MpiRequest>();
  request->payload.assign(data, data + n);
  MPI_Isend(request->payload.data(), int(n), MPI_FLOAT, peer, tag,
            MPI_COMM_WORLD, &request->request);
  return request;
}

std::unique_ptr<Request> MpiCommunicator::recvAsync(float *data, int64_t n,
                                                    int peer, int tag) {
  auto request = std::make_unique<MpiRequest>();
  MPI_Irecv(data, int(n), MPI_FLOAT, peer, tag, MPI_COMM_WORLD,
            &request->request);
  return request;
}

Status MpiCommunicator::allReduceSum(float *data, int64_t n, const int *group,
                                     int groupSize) {
  // Groups are tiny (the two ends of a tied embedding): reduce to the
  // first member and send the sum back, on the largest tag, which message
  // keys never reach.
  const int tag = tagUpperBound;
  int root = group[0];
  if (worldRank == root) {
    std::vector<float> incoming(n);
    for (int i = 1; i < groupSize; ++i) {
      MPI_CHECK(MPI_Recv(incoming.data(), int(n), MPI_FLOAT, group[i], tag,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      for (int64_t k = 0; k < n; ++k)
        data[k] += incoming[k];
    }
    for (int i = 1; i < groupSize; ++i)
      MPI_CHECK(
          MPI_Send(data, int(n), MPI_FLOAT, group[i], tag, MPI_COMM_WORLD));
  } else {
    MPI_CHECK(MPI_Send(data, int(n), MPI_FLOAT, root, tag, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Recv(data, int(n), MPI_FLOAT, root, tag, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE));
  }
  return Status::ok();
}

Status MpiCommunicator::allReduceSum(double *data, int64_t n) {
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, int(n), MPI_DOUBLE, MPI_SUM,
                          MPI_COMM_WORLD));
  return Status::ok();
}

Status MpiCommunicator::allReduceMax(double *data, int64_t n) {
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, int(n), MPI_DOUBLE, MPI_MAX,
                          MPI_COMM_WORLD));
  return Status::ok();
}

Status MpiCommunicator::gatherToRoot(const std::string &mine,
                                     std::vector<std::string> &all) {
  int length = int(mine.size());
  std::vector<int> lengths(worldRank == 0 ? worldSize : 0);
  MPI_CHECK(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0,
                       MPI_COMM_WORLD));
  std::vector<int> offsets(lengths.size(), 0);
  int total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::vector<char> bytes(total);
  MPI_CHECK(MPI_Gatherv(mine.data(), length, MPI_CHAR, bytes.data(),
                        lengths.data(), offsets.data(), MPI_CHAR, 0,
                        MPI_COMM_WORLD));
  all.clear();
  for (size_t r = 0; r < lengths.size(); ++r)
    all.emplace_back(bytes.data() + offsets[r], lengths[r]);
  return Status::ok();
}

void MpiCommunicator::barrier() { MPI_Barrier(MPI_COMM_WORLD); }

void MpiCommunicator::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort(); // MPI_Abort does not return; make that explicit.
}

} // namespace sluice::rt
