//===- NcclCommunicator.h - NCCL between GPUs, bootstrapped by MPI -*- C++
//-*-===//
//
// The Communicator for one rank per GPU: NCCL moves device memory with no
// host copy. MPI bootstraps it, as multi-node NCCL programs do: a rank
// makes an ncclUniqueId and MPI carries it to the others.
//
// * Pipeline messages: one two-rank communicator per directed link of the
//   plan (a device that sends to another), with its own stream on each
//   side. NCCL matches sends and receives by order, not by tag, so each
//   link must receive in the order it sends (checkMessageOrder); separate
//   links and streams keep a send from waiting behind an unrelated
//   receive, which on one shared stream could deadlock two stages that
//   send to each other.
// * Vocabulary collectives: one communicator over every rank per channel,
//   on the stream the caller gives (the vocabulary stream).
// * Host values (the step's loss, checks) and the tied embedding's rare
//   group sum go through MPI.
//
// A request is complete for the host as soon as NCCL has it enqueued;
// waitOn makes the consumer stream wait for the event recorded after it.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define SLUICE_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "HostAssisted.h"
#include "Plan.h"

#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace sluice::rt::cuda {

/// Every directed link (sender, receiver) `plan`'s messages use, in one
/// order every rank computes alike.
std::vector<std::pair<int, int>> getLinks(const Plan &plan);

/// NCCL has no tags: an error naming the first link whose receiver posts
/// its receives in another order than the sender sends.
Status checkMessageOrder(const Plan &plan);

class NcclCommunicator final : public HostAssistedCommunicator {
public:
  ~NcclCommunicator() override;
  /// Collective over every rank: creates the link and channel
  /// communicators on `device`.
  static Status create(MpiCommunicator &host, CudaDevice &device,
                       const std::vector<std::pair<int, int>> &links,
                       std::unique_ptr<NcclCommunicator> &out);

  std::unique_ptr<Request> sendAsync(DevicePtr data, int64_t count, int peer,
                                     int tag, Stream &stream) override;
  std::unique_ptr<Request> recvAsync(DevicePtr data, int64_t count, int peer,
                                     int tag, Stream &stream) override;
  std::unique_ptr<Request> broadcastAsync(DevicePtr data, int64_t count,
                                          int root, int channel,
                                          Stream &stream) override;
  std::unique_ptr<Request> allReduceAsync(DevicePtr data, int64_t count,
                                          Reduction reduction, int channel,
                                          Stream &stream) override;
  std::unique_ptr<Request> reduceSumAsync(DevicePtr data, int64_t count,
                                          int root, int channel,
                                          Stream &stream) override;
  [[noreturn]] void abort(int code) override;

private:
  struct Link;
  NcclCommunicator(MpiCommunicator &host, CudaDevice &device);
  /// Enqueues `op` on `on` after the work on `after`; the request waits for
  /// the event recorded after it.
  template <class Op>
  std::unique_ptr<Request> enqueue(Stream &after, Stream &on, Op &&op);

  /// (sender, receiver) -> this rank's side of the link.
  std::map<std::pair<int, int>, std::unique_ptr<Link>> links;
  void *channels[kChannels] = {}; // ncclComm_t
};

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
