//===- Threads.h - The CPU kernels' threads ---------------------*- C++ -*-===//
//
// The CPU backend's kernels outside OpenBLAS split their rows (or blocks)
// over a small pool of threads -- the calling thread and count - 1 workers
// that sleep between calls, so they never spin against OpenBLAS's own
// threads for the same cores. A split is static and contiguous and every
// element is computed by the same code whichever thread takes it, so the
// results do not depend on the thread count; sums across rows stay on one
// thread each. GEMMs split their output over the same pool, each part one
// single-threaded OpenBLAS call (CpuKernels::gemm), so OpenBLAS runs no
// threads of its own. sluice-run --threads sets the count (one count per
// rank: the launcher gives each rank its share of the cores).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CPU_THREADS_H
#define SLUICE_RUNTIME_CPU_THREADS_H

#include <cstdint>
#include <functional>

namespace sluice::rt::cpu {

/// Sets the kernels' thread count (at least 1); OpenBLAS stays at one.
void setThreads(int count);
int getThreads();

/// Calls body(begin, end) over [0, n) in contiguous parts, one per thread,
/// and returns when all are done; parts of fewer than `grain` items are
/// not worth a thread (n < 2 * grain runs on the caller alone).
void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body);

/// OpenBLAS on one thread while it lives, where the kernel threads each
/// call it on small blocks (attention's tiles): one level of threads, not
/// the kernel threads' times OpenBLAS's.
class SerialBlas {
public:
  SerialBlas();
  ~SerialBlas();
  SerialBlas(const SerialBlas &) = delete;
  SerialBlas &operator=(const SerialBlas &) = delete;
};

} // namespace sluice::rt::cpu

#endif // SLUICE_RUNTIME_CPU_THREADS_H
