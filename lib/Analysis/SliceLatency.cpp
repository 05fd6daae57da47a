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
