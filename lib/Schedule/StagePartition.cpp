//===- StagePartition.cpp - Split a layer chain into stages ---------------===//

#include "sluice/Schedule/StagePartition.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::sluice::sched;

static std::vector<int> partitionUniform(int layers, int stages) {
  std::vector<int> counts(stages, layers / stages);
  for (int i = 0; i < layers % stages; ++i)
    ++counts[1 + i];
  return counts;
}

/// The costliest stage of `counts` layers per stage.
static double getMaxStageCost(const PartitionProblem &problem,
                              const std::vector<int> &counts) {
  double worst = 0;
  size_t next = 0;
  for (int s = 0; s < problem.stages; ++s) {
    double cost = s == 0 ? problem.firstExtra : 0;
    if (s == problem.stages - 1)
      cost += problem.lastExtra;
    for (int i = 0; i < counts[s]; ++i)
      cost += problem.layerCosts[next++];
    worst = std::max(worst, cost);
  }
  return worst;
}

/// `emptyEnds`: the first and last stage may hold no transformer layer.
static std::vector<int> partitionCompute(const PartitionProblem &problem,
                                         bool emptyEnds) {
  int n = static_cast<int>(problem.layerCosts.size());
  int s = problem.stages;
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + problem.layerCosts[i];
  auto cost = [&](int stage, int begin, int end) {
    double c = prefix[end] - prefix[begin];
    if (stage == 0)
      c += problem.firstExtra;
    if (stage == s - 1)
      c += problem.lastExtra;
    return c;
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[i][j]: the smallest possible maximum stage cost when stages
  // 0..i-1 hold layers 0..j-1; cut[i][j] the start of stage i-1.
  std::vector<std::vector<double>> best(s + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(s + 1, std::vector<int>(n + 1, -1));
  best[0][0] = 0;
  for (int i = 1; i <= s; ++i) {
    int stage = i - 1;
    int minLayers = emptyEnds && (stage == 0 || stage == s - 1) ? 0 : 1;
    for (int j = 0; j <= n; ++j)
      for (int k = 0; k + minLayers <= j; ++k) {
        if (best[i - 1][k] == inf)
          continue;
        double candidate = std::max(best[i - 1][k], cost(stage, k, j));
        // `<` keeps the earliest cut among equal optima: deterministic.
        if (candidate < best[i][j]) {
          best[i][j] = candidate;
          cut[i][j] = k;
        }
      }
  }
  std::vector<int> counts(s);
  for (int i = s, j = n; i > 0; --i) {
    int k = cut[i][j];
    counts[i - 1] = j - k;
    j = k;
  }
  return counts;
}

FailureOr<std::vector<int>>
mlir::sluice::sched::partitionLayers(const PartitionProblem &problem,
                                     Balance balance, std::string &error) {
  int layers = static_cast<int>(problem.layerCosts.size());
  int stages = problem.stages;
  if (stages < 1) {
    error =
        llvm::formatv("the number of stages must be positive, got {0}", stages);
    return failure();
  }
  int needed = balance == Balance::Compute ? std::max(0, stages - 2) : stages;
  if (layers < needed) {
    error = llvm::formatv("{0} stages need at least {1} transformer layers, "
                          "the model has {2}",
                          stages, needed, layers);
    return failure();
  }
  if (balance == Balance::Uniform)
    return partitionUniform(layers, stages);
  if (balance == Balance::Compute)
    return partitionCompute(problem, /*emptyEnds=*/true);
  std::vector<int> uniform = partitionUniform(layers, stages);
  std::vector<int> balanced = partitionCompute(problem, /*emptyEnds=*/false);
  if (getMaxStageCost(problem, balanced) <=
      (1 - kAutoGain) * getMaxStageCost(problem, uniform))
    return balanced;
  return uniform;
}
