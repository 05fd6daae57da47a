//===- TokenSlicing.h - Where to cut a sequence into slices -----*- C++ -*-===//
//
// The token-slicing algorithms of Li et al., 2021 §3.3-3.4 and
// Sun et al., 2024 §3.4, free of IR: a slicing is the list of slice
// lengths l_1, ..., l_M (l_1 + ... + l_M = L), slice i running after
// l_1 + ... + l_{i-1} tokens of context.
//
//  * TeraPipe's dynamic programme: minimise the pipeline latency
//    sum_i t(l_i, ctx_i) + (K - 1) max_i t(l_i, ctx_i) on K stages, from
//    S*(L; t_max) = min sum t_i subject to t_i <= t_max by dynamic
//    programming (Algorithm 1). TeraPipe enumerates the bounds t_max; here
//    intervals of candidate bounds are searched, each ruled out or split by
//    one DP (docs/slicing.md): the same optimum, or within K epsilon of it
//    with epsilon > 0 as with the paper's skipped bounds (§3.3,
//    Optimization), with far fewer DPs.
//  * Its joint extension over the batch dimension (§3.4): the best latency
//    T_b of every batch size b, then a 1D knapsack splitting the batch B
//    into parts b_1 + ... + b_D = B of least sum T_{b_d}.
//  * The latency model of equation 9: t(i, j) = t(i, 0) + a0 + a1 i + a2 j +
//    a3 i j, with t(i, 0) measured for every i and the four coefficients
//    fitted by least squares to samples with context.
//  * Seq1F1B's computation-wise partition (equations 7-8): k segments of
//    equal cost under a cost that grows with the context.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SCHEDULE_TOKENSLICING_H
#define SLUICE_SCHEDULE_TOKENSLICING_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mlir::sluice::slicing {

/// t(length, context): the latency of one slice of `length` tokens after
/// `context` tokens of the same sequence, on one pipeline stage.
using SliceLatency =
    llvm::function_ref<double(int64_t length, int64_t context)>;

/// Latency of `lengths` on `stages` stages: sum t_i + (stages - 1) max t_i.
double getPipelineLatency(llvm::ArrayRef<int64_t> lengths, int stages,
                          SliceLatency latency);

struct Slicing {
  /// The objective: sum t_i + (stages - 1) max t_i.
  double latency = 0;
  std::vector<int64_t> lengths;
  /// How many times the dynamic programme ran (one bound t_max each).
  int64_t boundsEvaluated = 0;
};

struct TeraPipeOptions {
  int stages = 1;
  /// Do not split an interval of bounds t_max narrower than epsilon; the
  /// answer is then within stages * epsilon of the optimum. 0: exact.
  double epsilon = 0;
  /// Slice lengths are multiples of this (the last slice takes the rest).
  int64_t granularity = 1;
  /// Exactly this many slices (0: as many as is best).
  int64_t slices = 0;
};

/// TeraPipe's dynamic programme over slicings of `tokens` tokens.
Slicing solveTeraPipe(int64_t tokens, SliceLatency latency,
                      const TeraPipeOptions &options);

/// Every slicing of `tokens` (2^(tokens-1) of them): the exact optimum, for
/// testing the dynamic programme on small cases.
Slicing solveExhaustively(int64_t tokens, int stages, SliceLatency latency);

/// §3.4: the batch of `batch` sequences split into parts of b_d sequences
/// each sliced along tokens on its own.
struct JointSlicing {
  /// sum over parts of each part's pipeline latency T_{b_d}.
  double latency = 0;
  std::vector<int64_t> batchSplit;
  /// For each part, its token slicing.
  std::vector<std::vector<int64_t>> tokenSlices;
};

/// t(rows, length, context) for a part of `rows` sequences.
using BatchSliceLatency =
    llvm::function_ref<double(int64_t rows, int64_t length, int64_t context)>;

/// The joint optimum: the dynamic programme for every part size b in
/// 1..batch, then the knapsack over part sizes.
JointSlicing solveTeraPipeJoint(int64_t batch, int64_t tokens,
                                BatchSliceLatency latency,
                                const TeraPipeOptions &options);

/// Equation 9 fitted: the measured t(i, 0) for i = 1..L (index i - 1) and
/// the context term's coefficients.
class LatencyModel {
public:
  /// Least squares over `samples` (length, context, seconds), with t(i, 0)
  /// from `base` (base[i - 1]; every sample's length must be <= its
  /// size). The fit's relative error is the mean of |prediction - sample|
  /// / sample over the samples with context > 0 (TeraPipe reports under
  /// 2%); the largest is kept too.
  static LatencyModel fit(std::vector<double> base,
                          llvm::ArrayRef<std::array<double, 3>> samples);

  double operator()(int64_t length, int64_t context) const;
  const std::array<double, 4> &getCoefficients() const { return a; }
  double getRelativeError() const { return relativeError; }
  double getMaxRelativeError() const { return maxRelativeError; }
  int64_t getMaxLength() const { return int64_t(base.size()); }

private:
  std::vector<double> base;
  std::array<double, 4> a{};
  double relativeError = 0;
  double maxRelativeError = 0;
};

/// Seq1F1B's computation-wise partition: `slices` segments of `tokens`
/// whose costs cost(length, prefix) are as equal as integer lengths allow
/// (the common cost is found by bisection; each segment is the longest
/// prefix of what remains within it). With a cost that grows with the
/// prefix, the first segment is the longest.
std::vector<int64_t> solveEqualCost(int64_t tokens, int64_t slices,
                                    SliceLatency cost);

/// `slices` near-equal lengths (the first ones one token longer).
std::vector<int64_t> getUniformLengths(int64_t tokens, int64_t slices);

/// Why `lengths` is not a slicing of `tokens` ("" if it is).
std::string checkSlicing(int64_t tokens, llvm::ArrayRef<int64_t> lengths);

} // namespace mlir::sluice::slicing

#endif // SLUICE_SCHEDULE_TOKENSLICING_H
