//===- CollectiveQueue.cpp - Multi-step collectives in issue order --------===//

#include "CollectiveQueue.h"

#include <chrono>
#include <thread>

namespace sluice::rt {

CollectiveQueue::CollectiveQueue(Device &device, Stream &stream,
                                 Communicator &comm,
                                 Communicator *tensorGroup)
    : device(device), stream(stream), comm(comm), tensorGroup(tensorGroup) {}

void CollectiveQueue::beginStep() {
  for (auto *done : {&completed, &begun}) {
    for (auto &[key, event] : *done)
      spareEvents.push_back(std::move(event));
    done->clear();
  }
}

std::unique_ptr<Event> CollectiveQueue::takeEvent() {
  if (spareEvents.empty())
    return device.createEvent();
  std::unique_ptr<Event> event = std::move(spareEvents.back());
  spareEvents.pop_back();
  return event;
}

void CollectiveQueue::describe(const std::string &what) {
  comm.describeNext(what);
  if (tensorGroup)
    tensorGroup->describeNext(what);
}

Status CollectiveQueue::post(const Key &key, std::vector<Step> steps,
                             const std::string &what) {
  Collective c{key, std::move(steps), 0, nullptr, takeEvent(), what};
  c.begin->record(stream);
  if (comm.chainsSteps()) {
    // The whole collective at its place in the issue order, its steps one
    // after another there, as NCCL's stream order has them.
    for (Step &step : c.steps)
      step.start = [this, what, start = std::move(step.start)] {
        describe(what);
        return start();
      };
    comm.describeNext(what);
    c.pending = comm.postChain(std::move(c.steps));
    c.steps.clear();
    if (!c.pending)
      return Status::error("a vocabulary collective could not start");
  }
  queues[std::get<0>(key)].push_back(std::move(c));
  return progress();
}

Status CollectiveQueue::progress() {
  for (std::deque<Collective> &queue : queues) {
    while (!queue.empty()) {
      Collective &head = queue.front();
      if (head.pending) {
        // Done for the host: whatever the stream runs next sees the
        // transfer's data.
        if (!head.pending->test())
          break;
        head.pending.reset();
        if (head.next > 0 && head.steps[head.next - 1].after)
          head.steps[head.next - 1].after();
      }
      if (head.next < head.steps.size()) {
        describe(head.what);
        if (head.next > 0) {
          comm.continueNext();
          if (tensorGroup)
            tensorGroup->continueNext();
        }
        head.pending = head.steps[head.next++].start();
        if (!head.pending)
          return Status::error("a vocabulary collective could not start");
        continue;
      }
      std::unique_ptr<Event> done = takeEvent();
      done->record(stream);
      Key key = head.key;
      completed[key] = std::move(done);
      begun[key] = std::move(head.begin);
      queue.pop_front();
      if (onDone)
        onDone(key);
    }
  }
  return Status::ok();
}

Status CollectiveQueue::spin(const std::function<bool()> &done) {
  auto start = std::chrono::steady_clock::now();
  while (!done()) {
    if (Status st = progress(); !st)
      return st;
    if (progressOthers)
      if (Status st = progressOthers(); !st)
        return st;
    // A host transport's peer that failed or never came (a transport that
    // watches progress itself reports first, naming every rank).
    if (!comm.watchesProgress() &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                      start)
                .count() > timeout)
      return Status::error("no progress for " +
                           std::to_string(int64_t(timeout)) +
                           " s (--comm-timeout) waiting for a vocabulary "
                           "collective; a peer has failed or never joined it");
    std::this_thread::yield();
  }
  return Status::ok();
}

Status CollectiveQueue::waitFor(const Key &key, Stream &waiter) {
  if (Status st = spin([&] { return completed.count(key) > 0; }); !st)
    return st;
  waiter.wait(*completed.at(key));
  return Status::ok();
}

Status CollectiveQueue::finish(Stream &after) {
  if (Status st = spin([this] {
        for (const std::deque<Collective> &queue : queues)
          if (!queue.empty())
            return false;
        return true;
      });
      !st)
    return st;
  for (auto &[key, event] : completed)
    after.wait(*event);
  return Status::ok();
}

std::vector<CollectiveQueue::Span> CollectiveQueue::getSpans(Event &origin) {
  std::vector<Span> spans;
  for (auto &[key, done] : completed) {
    auto begin = begun.find(key);
    if (begin == begun.end())
      continue;
    spans.push_back({key, begin->second->secondsSince(origin),
                     done->secondsSince(origin)});
  }
  return spans;
}

} // namespace sluice::rt
