//===- KernelTrace.cpp - Every GPU activity of a process, through CUPTI ---===//
//
//   CUDA_INJECTION64_PATH=libsluice-kernel-trace.so \
//   SLUICE_KERNEL_TRACE=trace.csv sluice-bench-step PLAN ...
//   (under mpirun, SLUICE_KERNEL_TRACE=trace-%r.csv: a file per rank)
//   python3 bench/kernel_gaps.py trace.csv
//
// The CUDA driver loads this library into any CUDA process named by
// CUDA_INJECTION64_PATH and calls InitializeInjection; it records every
// kernel, memory copy and memset with its device start and end (CUPTI's
// activity API, the records Nsight Systems and PyTorch's profiler read)
// and writes them at exit as "kind,start_ns,end_ns,stream,name" lines.
// Unlike Nsight Compute, nothing is replayed or serialised: the times are
// the step's own, so the gaps between activities -- where the GPU idles
// waiting for the host -- are real. bench/kernel_gaps.py sums a step's
// busy time per kernel and lists its largest idle gaps.
//
//===----------------------------------------------------------------------===//

#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Record {
  char kind; // k(ernel), c(opy), s(et)
  uint64_t start, end;
  uint32_t stream;
  std::string name;
};

std::mutex lock;
std::vector<Record> records;
size_t dropped = 0;

void CUPTIAPI requestBuffer(uint8_t **buffer, size_t *size,
                            size_t *maxRecords) {
  constexpr size_t kBytes = 8 << 20;
  // CUPTI wants 8-byte aligned buffers.
  *buffer = static_cast<uint8_t *>(std::aligned_alloc(8, kBytes));
  *size = *buffer ? kBytes : 0;
  *maxRecords = 0;
}

void CUPTIAPI completeBuffer(CUcontext, uint32_t, uint8_t *buffer, size_t,
                             size_t valid) {
  CUpti_Activity *record = nullptr;
  std::lock_guard<std::mutex> guard(lock);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) ==
         CUPTI_SUCCESS) {
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      auto *k = reinterpret_cast<CUpti_ActivityKernel10 *>(record);
      records.push_back({'k', k->start, k->end, k->streamId,
                         k->name ? k->name : "?"});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto *m = reinterpret_cast<CUpti_ActivityMemcpy6 *>(record);
      records.push_back({'c', m->start, m->end, m->streamId,
                         "memcpy " + std::to_string(m->bytes)});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto *m = reinterpret_cast<CUpti_ActivityMemset4 *>(record);
      records.push_back({'s', m->start, m->end, m->streamId,
                         "memset " + std::to_string(m->bytes)});
      break;
    }
    default:
      break;
    }
  }
  size_t lost = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &lost);
  dropped += lost;
  std::free(buffer);
}

void writeRecords() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const char *given = std::getenv("SLUICE_KERNEL_TRACE");
  std::string path = given ? given : "kernel-trace.csv";
  // Several ranks, one file each: "%r" is the MPI rank (Open MPI's
  // OMPI_COMM_WORLD_RANK; 0 outside mpirun).
  if (size_t at = path.find("%r"); at != std::string::npos) {
    const char *rank = std::getenv("OMPI_COMM_WORLD_RANK");
    path.replace(at, 2, rank ? rank : "0");
  }
  std::FILE *out = std::fopen(path.c_str(), "w");
  if (!out) {
    std::fprintf(stderr, "kernel trace: cannot write %s\n", path.c_str());
    return;
  }
  std::lock_guard<std::mutex> guard(lock);
  std::fprintf(out, "kind,start_ns,end_ns,stream,name\n");
  for (const Record &r : records) {
    // Kernel names may hold commas (template arguments): quote them.
    std::string name;
    for (char c : r.name)
      name += c == '"' ? '\'' : c;
    std::fprintf(out, "%c,%llu,%llu,%u,\"%s\"\n", r.kind,
                 (unsigned long long)r.start, (unsigned long long)r.end,
                 r.stream, name.c_str());
  }
  std::fclose(out);
  std::fprintf(stderr, "kernel trace: %zu activities%s written\n",
               records.size(),
               dropped ? (", " + std::to_string(dropped) + " dropped").c_str()
                       : "");
}

} // namespace

extern "C" __attribute__((visibility("default"))) int
InitializeInjection(void) {
  if (cuptiActivityRegisterCallbacks(requestBuffer, completeBuffer) !=
      CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel trace: CUPTI refused the callbacks\n");
    return 0;
  }
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
        CUPTI_ACTIVITY_KIND_MEMSET})
    if (cuptiActivityEnable(kind) != CUPTI_SUCCESS)
      std::fprintf(stderr, "kernel trace: CUPTI cannot record kind %d\n",
                   int(kind));
  std::atexit(writeRecords);
  return 1;
}
