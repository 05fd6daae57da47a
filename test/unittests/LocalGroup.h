//===- LocalGroup.h - A tensor-parallel group on threads ---------*- C++
//-*-===//
//
// Test support: the collectives of `n` tensor-parallel shards that run on
// threads of one process (FeatureConformanceTest, TensorParallelTest).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_TEST_UNITTESTS_LOCALGROUP_H
#define SLUICE_TEST_UNITTESTS_LOCALGROUP_H

#include "Backend.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace sluice::rt::test_support {

/// A collective of `n` shards on threads: each posts its buffer, and
/// every one reads the others' once all have.
class LocalGroup {
public:
  explicit LocalGroup(int n) : n(n), posted(n) {}

  /// Every shard gets the same result: the reduction in rank order, as a
  /// real all-reduce gives each rank the same bits.
  void allReduce(int rank, float *data, int64_t count, Reduction reduction) {
    posted[rank] = data;
    sync();
    std::vector<float> all(posted[0], posted[0] + count);
    for (int r = 1; r < n; ++r)
      for (int64_t i = 0; i < count; ++i)
        all[i] = reduction == Reduction::Sum ? all[i] + posted[r][i]
                                             : std::max(all[i], posted[r][i]);
    sync();
    std::copy(all.begin(), all.end(), data);
    sync();
  }
  void reduceScatter(int rank, float *data, float *out, int64_t count) {
    posted[rank] = data;
    sync();
    for (int64_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int r = 0; r < n; ++r)
        sum += posted[r][rank * count + i];
      out[i] = sum;
    }
    sync();
  }
  void allGather(int rank, float *data, int64_t count) {
    posted[rank] = data;
    sync();
    for (int r = 0; r < n; ++r)
      if (r != rank)
        std::copy(posted[r] + r * count, posted[r] + (r + 1) * count,
                  data + r * count);
    sync();
  }

private:
  void sync() {
    std::unique_lock<std::mutex> lock(mutex);
    int at = generation;
    if (++arrived == n) {
      arrived = 0;
      ++generation;
      ready.notify_all();
      return;
    }
    ready.wait(lock, [&] { return generation != at; });
  }
  int n, arrived = 0, generation = 0;
  std::vector<float *> posted;
  std::mutex mutex;
  std::condition_variable ready;
};

} // namespace sluice::rt::test_support

#endif // SLUICE_TEST_UNITTESTS_LOCALGROUP_H
