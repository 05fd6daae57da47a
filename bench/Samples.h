//===- Samples.h - The benchmarks' one way to time and report -------------===//
//
// Every step benchmark (sluice-bench-step here, bench/torch_step.py for
// PyTorch) reports the same way, so figures side by side mean the same
// thing: per-iteration times taken by device events after warm-up
// iterations, their median, minimum, maximum and spread printed, and the
// raw samples written as one JSON document (bench/step_table.py joins
// several into one table). nccl-tests and PyTorch's
// torch.utils.benchmark are the models: the median as the figure, the
// spread beside it, never one run.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_BENCH_SAMPLES_H
#define SLUICE_BENCH_SAMPLES_H

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

namespace sluice::bench {

/// Iteration times in milliseconds and what they describe.
struct Samples {
  std::string name;              // e.g. "sluice bf16"
  std::vector<double> ms;        // one per timed iteration, in run order
  nlohmann::json attributes = nlohmann::json::object(); // device, versions, tokens, loss, ...

  double median() const { return quantile(0.5); }
  double min() const { return ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end()); }
  double max() const { return ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end()); }
  /// (max - min) / median: the whole range, not a deviation, so one slow
  /// iteration shows.
  double spread() const { return ms.empty() ? 0 : (max() - min()) / median(); }

  /// The median as numpy's default (linear between the two middle values).
  double quantile(double q) const {
    if (ms.empty())
      return 0;
    std::vector<double> sorted(ms);
    std::sort(sorted.begin(), sorted.end());
    double at = q * double(sorted.size() - 1);
    size_t lo = size_t(at);
    size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (at - double(lo)) * (sorted[hi] - sorted[lo]);
  }

  /// "median M ms (min A, max B, spread S% over N)".
  std::string summary() const {
    char out[160];
    std::snprintf(out, sizeof(out),
                  "median %.2f ms (min %.2f, max %.2f, spread %.1f%% over %zu)",
                  median(), min(), max(), 100.0 * spread(), ms.size());
    return out;
  }

  /// The document bench/step_table.py reads (the same keys torch_step.py
  /// writes).
  std::string toJson() const {
    nlohmann::json doc = attributes;
    doc["name"] = name;
    doc["unit"] = "ms";
    doc["samples"] = ms;
    doc["median"] = median();
    doc["min"] = min();
    doc["max"] = max();
    doc["spread"] = spread();
    char date[32];
    std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    doc["date"] = date;
    return doc.dump(2) + "\n";
  }
};

} // namespace sluice::bench

#endif // SLUICE_BENCH_SAMPLES_H
