//===- Threads.cpp - The CPU kernels' threads -----------------------------===//

#include "Threads.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace sluice::rt::cpu {

namespace {

/// count - 1 workers; a call hands each its part and waits for them. One
/// caller at a time: the ranks a test runs as threads of one process each
/// drive kernels, and a call that finds the pool busy runs on its own
/// thread alone (the same values: a split changes no element's code).
class Pool {
public:
  ~Pool() {
    std::lock_guard<std::mutex> caller(calling);
    resize(1);
  }

  int size() const { return count.load(); }

  void setSize(int n) {
    std::lock_guard<std::mutex> caller(calling);
    resize(n);
  }

  void run(int64_t n, int64_t grain,
           const std::function<void(int64_t, int64_t)> &body) {
    std::unique_lock<std::mutex> caller(calling, std::try_to_lock);
    if (!caller.owns_lock()) {
      body(0, n);
      return;
    }
    runAlone(n, grain, body);
  }

private:
  void resize(int count) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
      ++generation;
    }
    wake.notify_all();
    for (std::thread &t : workers)
      t.join();
    workers.clear();
    stopping = false;
    // Each worker starts from this generation: one read later, in the
    // worker, could already see a call's and sleep through it.
    uint64_t start = generation;
    for (int i = 1; i < count; ++i)
      workers.emplace_back([this, i, start] { work(i, start); });
    this->count = count;
  }

  void runAlone(int64_t n, int64_t grain,
                const std::function<void(int64_t, int64_t)> &body) {
    int parts = int(std::min<int64_t>(size(), n / std::max<int64_t>(grain, 1)));
    if (parts <= 1) {
      body(0, n);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      task = &body;
      items = n;
      active = parts;
      pending = parts - 1;
      ++generation;
    }
    wake.notify_all();
    body(0, n / parts);
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [this] { return pending == 0; });
    task = nullptr;
  }

  void work(int index, uint64_t seen) {
    for (;;) {
      const std::function<void(int64_t, int64_t)> *body;
      int64_t n;
      int parts;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return generation != seen; });
        seen = generation;
        if (stopping)
          return;
        if (index >= active)
          continue; // a call with fewer parts than workers
        body = task;
        n = items;
        parts = active;
      }
      (*body)(n * index / parts, n * (index + 1) / parts);
      std::lock_guard<std::mutex> lock(mutex);
      if (--pending == 0)
        done.notify_one();
    }
  }

  std::vector<std::thread> workers;
  std::atomic<int> count{1};
  /// Held by the caller the workers serve (and while they are replaced).
  std::mutex calling;
  std::mutex mutex;
  std::condition_variable wake, done;
  uint64_t generation = 0;
  bool stopping = false;
  const std::function<void(int64_t, int64_t)> *task = nullptr;
  int64_t items = 0;
  int active = 0, pending = 0;
};

Pool &getPool() {
  static Pool pool;
  return pool;
}

} // namespace

void setThreads(int count) {
  count = std::max(count, 1);
  getPool().setSize(count);
  // GEMMs split over this pool, each part on one OpenBLAS thread
  // (CpuKernels::gemm): OpenBLAS's own threads would spin beside it.
  openblas_set_num_threads(1);
}

int getThreads() { return getPool().size(); }

namespace {
/// OpenBLAS's count is one per process: the first SerialBlas of the
/// threads that hold one lowers it, the last raises it again.
std::mutex serialMutex;
int serialHolders = 0, serialSaved = 1;
} // namespace

SerialBlas::SerialBlas() {
  std::lock_guard<std::mutex> lock(serialMutex);
  // A pool of one splits nothing: OpenBLAS keeps its threads.
  if (serialHolders++ == 0) {
    serialSaved = getThreads() > 1 ? openblas_get_num_threads() : 1;
    if (serialSaved > 1)
      openblas_set_num_threads(1);
  }
}

SerialBlas::~SerialBlas() {
  std::lock_guard<std::mutex> lock(serialMutex);
  if (--serialHolders == 0 && serialSaved > 1)
    openblas_set_num_threads(serialSaved);
}

void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  getPool().run(n, grain, body);
}

} // namespace sluice::rt::cpu
