//===- SliceLatency.cpp - t(i, j) of a partitioned model ------------------===//

#include "sluice/Analysis/SliceLatency.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::sluice;

double mlir::sluice::measureSliceLatency(llvm::ArrayRef<StageProfile> stages,
                                         const CostModel &costs, int64_t length,
                                         int64_t context) {
  // §3.3: "replace all the t_fwd above with t_fwd + t_bwd".
  double slowest = 0;
  for (const StageProfile &stage : stages)
    slowest = std::max(
        slowest,
        costs.getComputeTime(stage, PassKind::F, length, context, 1, 1) +
            costs.getComputeTime(stage, PassKind::BW, length, context, 1, 1));
  double message =
      stages.empty()
          ? 0
          : costs.getTransferTime(stages.front().getMessageBytes(length));
  return slowest + 2 * message;
}

slicing::LatencyModel
mlir::sluice::fitSliceLatency(llvm::ArrayRef<StageProfile> stages,
                              const CostModel &costs, int64_t tokens,
                              int64_t granularity) {
  std::vector<double> base;
  base.reserve(tokens);
  for (int64_t i = 1; i <= tokens; ++i)
    base.push_back(measureSliceLatency(stages, costs, i, 0));
  // TeraPipe measures t(i, 0) for every i and fits the context term "with a
  // subset of all (i, j) combinations": lengths growing geometrically, 12
  // contexts each.
  std::vector<std::array<double, 3>> samples;
  granularity = std::max<int64_t>(granularity, 1);
  for (int64_t i = granularity; i <= tokens;
       i = std::max(i + granularity, i * 3 / 2))
    for (int step = 1; step <= 12; ++step) {
      int64_t context = (tokens - i) * step / 12;
      if (context > 0)
        samples.push_back({double(i), double(context),
                           measureSliceLatency(stages, costs, i, context)});
    }
  return slicing::LatencyModel::fit(std::move(base), samples);
}

FailureOr<std::vector<slicing::LatencyModel>>
mlir::sluice::fitMeasuredSliceLatency(llvm::ArrayRef<StageProfile> stages,
                                      const CostModel &costs, int64_t tokens,
                                      std::string &error) {
  std::vector<slicing::LatencyModel> models;
  for (const StageProfile &stage : stages) {
    const std::vector<std::array<double, 3>> &samples =
        costs.getSliceSamples(stage.name);
    // t(i, 0): the context-free samples by length, interpolated.
    std::vector<std::pair<double, double>> base;
    std::vector<std::array<double, 3>> withContext;
    for (const auto &s : samples) {
      if (s[1] == 0)
        base.push_back({s[0], s[2]});
      else
        withContext.push_back(s);
    }
    std::sort(base.begin(), base.end());
    if (base.empty()) {
      error = "the profile '" + costs.getSpec() +
              "' has no slice timings of "
              "stage " +
              stage.name +
              " (run sluice-run --profile FILE "
              "--profile-slices with the same partitioning)";
      return failure();
    }
    std::vector<double> table(tokens);
    for (int64_t i = 1; i <= tokens; ++i) {
      double x = double(i);
      auto hi =
          std::lower_bound(base.begin(), base.end(), std::make_pair(x, -1e300));
      double t;
      if (hi == base.end())
        t = base.size() == 1
                ? base.back().second
                : base.back().second +
                      (x - base.back().first) *
                          (base.back().second - base[base.size() - 2].second) /
                          (base.back().first - base[base.size() - 2].first);
      else if (hi == base.begin() || hi->first == x)
        t = hi->second;
      else {
        auto lo = hi - 1;
        t = lo->second + (x - lo->first) * (hi->second - lo->second) /
                             (hi->first - lo->first);
      }
      table[i - 1] = std::max(t, 0.0);
    }
    models.push_back(slicing::LatencyModel::fit(std::move(table), withContext));
  }
  return models;
}
