//===- StagePartition.h - Split a layer chain into stages -------*- C++ -*-===//

#ifndef SLUICE_SCHEDULE_STAGEPARTITION_H
#define SLUICE_SCHEDULE_STAGEPARTITION_H

#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace mlir::sluice::sched {

enum class Balance { Uniform, Compute, Auto };

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
///  * Auto (sluice-compile's default): Uniform, unless moving whole layers
///    off the stages that hold the vocabulary layers makes the costliest
///    stage at least kAutoGain cheaper -- then Compute's cut with every
///    stage keeping at least one layer. A head of a large vocabulary on a
///    shallow pipeline is the case (GPT-2's 50k-token head costs 5.2 of
///    its layers' forward FLOPs); a model whose head is a fraction of a
///    layer keeps the uniform split, and every stage runs a layer.
constexpr double kAutoGain = 0.05;

FailureOr<std::vector<int>> partitionLayers(const PartitionProblem &problem,
                                            Balance balance,
                                            std::string &error);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_STAGEPARTITION_H
