//===- PassLanes.cpp - An overlapped group's two passes, interleaved ------===//

#include "PassLanes.h"

namespace sluice::rt {

namespace {
/// The group and lane the calling thread runs, if any.
struct CurrentLane {
  PassLanes *lanes = nullptr;
  int lane = 0;
};
thread_local CurrentLane current;
} // namespace

PassLanes::~PassLanes() {
  if (!thread.joinable())
    return;
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  thread.join();
}

void PassLanes::enter(int lane) {
  current = {this, lane};
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [&] { return turn == lane; });
}

void PassLanes::yield(int lane) {
  std::unique_lock<std::mutex> lock(mutex);
  if (done[1 - lane])
    return;
  turn = 1 - lane;
  changed.notify_all();
  changed.wait(lock, [&] { return turn == lane; });
}

void PassLanes::leave(int lane) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    done[lane] = true;
    turn = 1 - lane;
  }
  changed.notify_all();
  current = {};
}

void PassLanes::serve() {
  for (;;) {
    const std::function<void()> *work;
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return stopping || job; });
      if (stopping)
        return;
      work = job;
      job = nullptr;
    }
    enter(1);
    (*work)();
    leave(1);
  }
}

void PassLanes::run(const std::function<void()> &forward,
                    const std::function<void()> &backward) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    done[0] = done[1] = false;
    turn = 1; // the backward first
    job = &backward;
  }
  if (!thread.joinable())
    thread = std::thread([this] { serve(); });
  changed.notify_all();
  enter(0);
  forward();
  leave(0);
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [&] { return done[1]; });
}

void PassLanes::handOver() {
  if (current.lanes)
    current.lanes->yield(current.lane);
}

} // namespace sluice::rt
