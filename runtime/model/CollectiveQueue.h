//===- CollectiveQueue.h - Multi-step collectives in issue order -*- C++ -*-===//
//
// The vocabulary shards' collectives (Yeung et al., 2024, section 4: the
// softmax statistics' all-reduces, the gradient's reduce) are each a chain
// of transfers with host work between them, issued on a stream of their
// own so that the passes run beside them (section 6.1). This queue keeps
// them in issue order, one queue per ordering domain, advances their steps
// as transfers complete without ever blocking, and records when each began
// and ended on its stream. The shards (Vocab.h) decide what the steps are.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_COLLECTIVEQUEUE_H
#define SLUICE_RUNTIME_COLLECTIVEQUEUE_H

#include "Backend.h"

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace sluice::rt {

class CollectiveQueue {
public:
  using Step = Communicator::ChainStep;
  /// What names a collective: (queue, group, microbatch, slice).
  using Key = std::tuple<int, int, int, int>;
  static constexpr int kQueues = 2;

  /// Steps run on `stream` of `device`; transfers over `comm` and, where a
  /// step combines tensor-parallel shards, `tensorGroup` (both named in
  /// their messages).
  CollectiveQueue(Device &device, Stream &stream, Communicator &comm,
                  Communicator *tensorGroup);

  /// A new step: the last one's events are recycled.
  void beginStep();
  /// Queues collective `key` (described as `what` for the transports)
  /// after what `stream` has enqueued so far, and advances the queues.
  Status post(const Key &key, std::vector<Step> steps, const std::string &what);
  /// Advances the head collective of each queue, never blocking.
  Status progress();
  /// Orders `waiter` after collective `key`, advancing everything until
  /// the host has issued all of it.
  Status waitFor(const Key &key, Stream &waiter);
  /// Waits for every queued collective; orders `after` behind them all.
  Status finish(Stream &after);

  /// Called with each collective's key once it completes.
  void setOnDone(std::function<void(const Key &)> done) {
    onDone = std::move(done);
  }
  /// What else to advance while waiting (a host-staged transport posts
  /// transfers only when advanced).
  void setProgressOthers(std::function<Status()> others) {
    progressOthers = std::move(others);
  }
  /// Seconds a wait may make no progress (--comm-timeout).
  void setTimeout(double seconds) { timeout = seconds; }

  /// Each completed collective of the step as seconds after `origin` on
  /// the stream: from when its inputs were ready to when its result was.
  struct Span {
    Key key;
    double start, end;
  };
  std::vector<Span> getSpans(Event &origin);

private:
  struct Collective {
    Key key;
    std::vector<Step> steps;
    size_t next = 0;
    std::unique_ptr<Request> pending;
    /// On the stream once the collective's inputs are ready.
    std::unique_ptr<Event> begin;
    std::string what;
  };
  std::unique_ptr<Event> takeEvent();
  /// Advances everything until `done`, against the timeout.
  Status spin(const std::function<bool()> &done);
  void describe(const std::string &what);

  Device &device;
  Stream &stream;
  Communicator &comm;
  Communicator *tensorGroup;
  std::deque<Collective> queues[kQueues];
  /// Finished collectives, each with the stream's event after it, and the
  /// `begin` events of the same.
  std::map<Key, std::unique_ptr<Event>> completed, begun;
  std::vector<std::unique_ptr<Event>> spareEvents;
  std::function<void(const Key &)> onDone;
  std::function<Status()> progressOthers;
  double timeout = 600;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_COLLECTIVEQUEUE_H
