//===- StagePartition.h - Split a layer chain into stages -------*- C++ -*-===//

#ifndef SLUICE_SCHEDULE_STAGEPARTITION_H
#define SLUICE_SCHEDULE_STAGEPARTITION_H

#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace mlir::sluice::sched {

enum class Balance { Uniform, Compute };

/// A chain of transformer layers to cut into `stages` consecutive groups.
/// The first stage also carries `firstExtra` (the input layer), the last
/// `lastExtra` (the output layer).
struct PartitionProblem {
  std::vector<double> layerCosts;
  double firstExtra = 0;
  double lastExtra = 0;
  int stages = 1;
};

/// Transformer layers per stage.
///  * Uniform: as equal as possible, each stage at least one layer; the
///    layers that do not divide go one each to stages 1, 2, ... (stage 0
///    already holds the embedding).
///  * Compute (the vocabulary-parallelism paper's "Redis" baseline, §6.2):
///    minimises the most expensive stage, vocabulary layers included, over
///    all contiguous cuts (dynamic programming, O(stages * layers^2)); the
///    first and last stage may hold no transformer layer when their
///    vocabulary layer alone is as costly as a stage, the others at least
///    one.
FailureOr<std::vector<int>> partitionLayers(const PartitionProblem &problem,
                                            Balance balance,
                                            std::string &error);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_STAGEPARTITION_H
