//===- NcclCommunicator.h - NCCL between GPUs, bootstrapped by MPI -*- C++
//-*-===//
//
// The Communicators of a rank whose GPU talks NCCL (docs/communication.md):
//
// * One world communicator, initialised from an ncclUniqueId that MPI
//   broadcasts (as multi-node NCCL programs do), and every other
//   communicator split from it (ncclCommSplit), only those the plan uses:
//   per group of the mesh -- a pipeline (same replica and shard), a
//   device's replicas, a device's tensor-parallel shards -- one
//   communicator per stream the group's operations run on (a pipeline's
//   messages, its vocabulary collectives; a device's gradient sums; the
//   tensor-parallel sums and their vocabulary collectives), and one per
//   sub-group a gradient is summed over (a tied table's two ends, shards
//   sharing key/value heads).
// * Every operation goes on the stream the executor gives, in the order
//   the executor issues it: the step's global communication order
//   (CommOrder.h), so every rank issues every communicator's operations
//   at the same position of one global sequence -- NCCL's condition for
//   using several communicators without deadlock. NCCL 2.26 and later are
//   told to keep that order on the GPU too (NCCL_LAUNCH_ORDER_IMPLICIT).
// * Nonblocking communicators: initialisation and every operation that
//   NCCL leaves in progress are polled against a deadline; while the host
//   waits for the GPU, check() reads NCCL's asynchronous errors and the
//   same deadline. A failure aborts every communicator and names the rank
//   and the operation it was waiting in.
// * Host values (the step's loss, checks) go through the group's MPI
//   communicator.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define SLUICE_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "CommLayout.h"
#include "HostAssisted.h"
#include "Plan.h"

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sluice::rt::cuda {

/// The NCCL communicators `plan` needs on a rank at `at`: their names, for
/// the memory allowance and the messages.
std::vector<std::string> getNcclCommunicatorNames(const Plan &plan,
                                                  const MeshPosition &at);

/// One NCCL communicator of this rank and what was issued on it.
class NcclComm {
public:
  NcclComm(std::string name, void *handle)
      : name(std::move(name)), handle(handle) {}
  std::string name;
  void *handle; // ncclComm_t
  int64_t issued = 0;
  /// The latest operations, each with the event after it.
  struct Issued {
    std::string what;
    int64_t index;    // on this communicator, from 1
    int64_t sequence; // over every communicator of the rank
    std::shared_ptr<Event> done;
  };
  std::deque<Issued> recent;
};

class NcclMesh;

/// The NCCL side of one group of ranks.
class NcclCommunicator final : public HostAssistedCommunicator {
public:
  NcclCommunicator(HostGroup &host, CudaDevice &device, NcclMesh &mesh)
      : HostAssistedCommunicator(host, device), mesh(mesh) {}

  // Every device operation (runtime/DeviceCollectives.def).
#define SLUICE_DEVICE_OP(NAME, PARAMS, REQUIRED)                               \
  std::unique_ptr<Request> NAME PARAMS override;
#include "DeviceCollectives.def"
  Status allReduceSum(DevicePtr data, int64_t count, const int *group,
                      int groupSize, Stream &stream) override;
  using HostAssistedCommunicator::allReduceSum;
  [[noreturn]] void abort(int code) override;
  void describeNext(const std::string &what) override { next = what; }
  /// ncclGroupStart/End around the executor's adjacent sends and
  /// receives; each operation's event is recorded after ncclGroupEnd.
  bool groupsTransfers() const override { return true; }
  void startGroup() override;
  Status endGroup() override;

  /// The communicator for operations on `kind`'s stream.
  void setStreamComm(StreamKind kind, NcclComm *comm) {
    streamComms[int(kind)] = comm;
  }
  /// The communicator over the ranks `members` of this group.
  void setGroupComm(std::vector<int> members, NcclComm *comm) {
    groupComms[std::move(members)] = comm;
  }

private:
  /// The communicator of `stream` (null, with the failure recorded, if
  /// the group has none there).
  NcclComm *commFor(Stream &stream, const char *what);
  /// Enqueues `op` on `on` after the work on `after`, on `comm`; the
  /// request waits for the event recorded after it.
  template <class Op>
  std::unique_ptr<Request> enqueue(NcclComm *comm, Stream &after, Stream &on,
                                   const std::string &kind, Op &&op);

  /// Ends the job on an NCCL error (`result`, an ncclResult_t); settles an operation NCCL left in
  /// progress (a nonblocking communicator's), except inside a group,
  /// whose progress ncclGroupEnd reports.
  void checkResult(int result, NcclComm &comm,
                   const std::string &what, bool inGroup);
  /// Records `done` on `on` after an operation NCCL has launched, and
  /// remembers the operation for the messages.
  void noteIssued(NcclComm &comm, const std::string &what,
                  const std::shared_ptr<Event> &done, Stream &on);

  NcclMesh &mesh;
  /// Between startGroup and endGroup: the operations issued, each with
  /// the stream and the event to record after the group.
  struct Grouped {
    NcclComm *comm;
    Stream *on;
    std::string what;
    std::shared_ptr<Event> done;
  };
  bool grouping = false;
  std::vector<Grouped> grouped;
  NcclComm *streamComms[kStreamKinds] = {};
  std::map<std::vector<int>, NcclComm *> groupComms;
  std::string next;
};

struct NcclSettings {
  /// How long any NCCL operation, or a host wait for the GPU, may make no
  /// progress before the rank gives up and ends the job (--comm-timeout).
  double timeoutSeconds = 600;
};

/// Every NCCL communicator of this rank.
class NcclMesh {
public:
  ~NcclMesh();
  /// Collective over the world: creates the world communicator and splits
  /// the ones the plan uses. `hosts` are this rank's pipeline, replicas and
  /// tensor-parallel groups over MPI (null where the plan has none).
  static Status create(HostGroup &world, CudaDevice &device,
                       const Plan &plan, const MeshPosition &at,
                       HostGroup *hosts[kMeshGroups], const NcclSettings &settings,
                       std::unique_ptr<NcclMesh> &out);

  /// The communicators of this rank's pipeline, replicas and shards (null
  /// where the plan has no such group), handed over once; they must not
  /// outlive the mesh.
  std::unique_ptr<NcclCommunicator> takeGroup(int which) {
    return std::move(groups[which]);
  }

  /// While the host waits `waited` seconds for the GPU: an error if NCCL
  /// reported one, or if the wait outlasts the timeout.
  Status check(double waited);
  /// Polls `comm` until NCCL has finished issuing to it (nonblocking
  /// communicators), against the timeout.
  Status settle(NcclComm &comm, const std::string &what);
  /// Aborts every communicator, unblocking kernels that wait for a peer.
  void abortAll();

  int getRank() const { return rank; }
  const std::string &getWhere() const { return where; }
  int getVersion() const { return version; }
  size_t getCount() const { return comms.size(); }

private:
  NcclMesh() = default;
  Status initWorld(HostGroup &world);
  /// Splits a communicator named `name` from the world (every rank calls
  /// it; `color` < 0 leaves this rank out).
  Status split(const std::string &name, int color, int key, NcclComm *&out);
  /// The oldest operation not yet done on the GPU, described.
  std::string describePending();

  int rank = 0, version = 0;
  std::string where; // "rank 3 (device 1, replica 0, shard 1)"
  NcclSettings settings;
  CudaDevice *device = nullptr;
  void *world = nullptr; // ncclComm_t
  std::vector<std::unique_ptr<NcclComm>> comms;
  std::unique_ptr<NcclCommunicator> groups[kMeshGroups];
  bool aborted = false;
};

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
