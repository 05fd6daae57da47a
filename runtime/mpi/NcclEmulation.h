//===- NcclEmulation.h - NCCL's rules over MPI, on the CPU ------*- C++ -*-===//
//
// `sluice-run --backend cpu --transport nccl`: the CPU backend's
// communication held to what NCCL guarantees and no more
// (docs/communication.md), so that an order NCCL could not run is found
// on any machine, and reported instead of hanging:
//
// * Communicators: the ones the CUDA backend splits (CommLayout.h), each
//   an MPI communicator here.
// * A collective completes only once every member has issued it, and
//   every member must issue a communicator's collectives alike (kind,
//   root, count, element type): each collective first compares a
//   signature over the communicator, then runs. A mismatch ends the job
//   naming every member's operation.
// * Point-to-point operations match in order per communicator and pair,
//   not by tag, and a send completes only once its receive is posted: a
//   header goes first with a synchronous send (MPI_Issend) and carries the
//   message's key, size and description, which the receiver checks
//   against the receive it posted.
// * Issue order: NCCL_LAUNCH_ORDER_IMPLICIT's worst case -- every
//   operation of a rank waits for the one issued before it, on any
//   communicator -- in the global order (the default). Order::Plan instead
//   reproduces the layout sluice-run used before the global order: each
//   device's plan order, a communicator and stream per directed link, and
//   the vocabulary shards' collectives on one stream with a communicator
//   per shard; it exists to show what that layout does (the tests keep the
//   two cases that deadlock it).
// * Nothing waits forever: with no progress for the timeout, the rank asks
//   every rank what it waits in and ends the job with one report.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CPU_NCCLEMULATION_H
#define SLUICE_RUNTIME_CPU_NCCLEMULATION_H

#include "CommLayout.h"
#include "MpiCommunicator.h"
#include "Plan.h"

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sluice::rt {

class EmulatedNcclCommunicator;

class NcclEmulation {
public:
  enum class Order { Global, Plan };
  struct Op;
  /// One emulated communicator: its MPI communicator and name.
  struct Comm {
    std::string name;
    std::unique_ptr<MpiCommunicator> mpi;
    int64_t issued = 0;
    /// Per peer: sends and receives issued on it, in order.
    std::map<int, int64_t> sent, received;
  };

  ~NcclEmulation();
  /// Collective over the world. `hosts` are this rank's pipeline, replicas
  /// and tensor-parallel groups over MPI (null where the plan has none;
  /// the pipeline is the world when the plan has one replica and shard).
  static Status create(const Plan &plan, Order order, double timeoutSeconds,
                       MpiCommunicator *hosts[kMeshGroups], Device &device,
                       std::unique_ptr<NcclEmulation> &out);
  /// The communicators of this rank's groups, handed over once; they must
  /// not outlive the emulation.
  std::unique_ptr<Communicator> takeGroup(MeshGroup group);

  /// Queues `op` behind everything this rank issued before it (see the
  /// header comment); the request completes with it.
  std::unique_ptr<Request> post(std::shared_ptr<Op> op);
  /// Advances every operation as far as it can go without blocking; ends
  /// the job on a mismatch or after the timeout without progress.
  void progress();
  /// The next operation posted continues the one that just completed.
  void setContinuation() { continuation = true; }
  /// The operations posted until endGroup start together, as one NCCL
  /// group: one position in the issue order, none behind another.
  void startGroup();
  void endGroup();

  Order getOrder() const { return order; }
  [[noreturn]] void abort(int code);

private:
  NcclEmulation() = default;
  bool tryStart(Op &op);
  /// Starts a send's, receive's or collective's first message.
  void begin(Op &op);
  /// Starts a chain's current step, placed ahead of the chain.
  void startStep(Op &chain);
  bool advance(Op &op);
  void finish(Op &op);
  [[noreturn]] void reportMismatch(const std::string &message);
  std::string describeState() const;
  void answerReports();
  [[noreturn]] void reportStall();

  Order order = Order::Global;
  double timeout = 600;
  int rank = 0, ranks = 1;
  std::string where;
  std::vector<std::unique_ptr<Comm>> comms;
  std::unique_ptr<EmulatedNcclCommunicator> groups[kMeshGroups];
  /// Queue name -> the operations in it, oldest first.
  std::map<std::string, std::deque<std::shared_ptr<Op>>> queues;
  std::vector<std::shared_ptr<Op>> active;
  std::shared_ptr<Op> lastPosted;
  /// The group being issued (startGroup), if any.
  std::shared_ptr<Op> group;
  bool progressing = false;
  bool continuation = false;
  std::chrono::steady_clock::time_point lastProgress;
  /// The stall reports' communicator (a duplicate of the world) and the
  /// answers in flight.
  void *control = nullptr;
  std::vector<std::unique_ptr<std::string>> answers;
  std::vector<void *> answerRequests;
  int64_t sequence = 0;
  friend class EmulatedNcclCommunicator;
};

/// One group's communicator under the emulation.
class EmulatedNcclCommunicator final : public HostBackedCommunicator {
public:
  EmulatedNcclCommunicator(NcclEmulation &engine, MpiCommunicator &host,
                           MeshGroup group, Device &device)
      : HostBackedCommunicator(host), engine(engine), group(group),
        device(device) {}

  // Every device operation (runtime/DeviceCollectives.def).
#define SLUICE_DEVICE_OP(NAME, PARAMS, REQUIRED)                               \
  std::unique_ptr<Request> NAME PARAMS override;
#include "DeviceCollectives.def"
  Status allReduceSum(DevicePtr data, int64_t count, const int *members,
                      int groupSize, Stream &stream) override;
  using HostBackedCommunicator::allReduceSum;
  [[noreturn]] void abort(int code) override { engine.abort(code); }
  void describeNext(const std::string &what) override { next = what; }
  void continueNext() override { engine.setContinuation(); }
  bool groupsTransfers() const override { return true; }
  void startGroup() override { engine.startGroup(); }
  Status endGroup() override {
    engine.endGroup();
    return Status::ok();
  }
  bool chainsSteps() const override { return true; }
  bool watchesProgress() const override { return true; }
  std::unique_ptr<Request> postChain(std::vector<ChainStep> steps) override;

  /// The communicators for collectives by stream kind (and, in the plan
  /// layout, by vocabulary channel), for sums over `members`, and for
  /// messages.
  std::map<int, NcclEmulation::Comm *> streamComms, channelComms;
  std::map<std::vector<int>, NcclEmulation::Comm *> groupComms;
  NcclEmulation::Comm *p2p = nullptr;

private:
  /// A collective on the communicator of `stream` (or `channel`).
  std::unique_ptr<Request>
  collective(const std::string &kind, Stream &stream, int channel,
             std::function<std::unique_ptr<Request>(MpiCommunicator &)> run);
  std::unique_ptr<Request>
  post(NcclEmulation::Comm *comm, const std::string &kind,
       const std::string &queue,
       std::function<std::unique_ptr<Request>(MpiCommunicator &)> run);
  std::string takeWhat(const std::string &kind);

  NcclEmulation &engine;
  MeshGroup group;
  Device &device;
  std::string next;
  HostStream hostStream;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_CPU_NCCLEMULATION_H
