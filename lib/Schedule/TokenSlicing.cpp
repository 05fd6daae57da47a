//===- TokenSlicing.cpp - Where to cut a sequence into slices -------------===//

#include "sluice/Schedule/TokenSlicing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir::sluice;
using namespace mlir::sluice::slicing;

static constexpr double kInfinity = std::numeric_limits<double>::infinity();

double slicing::getPipelineLatency(llvm::ArrayRef<int64_t> lengths, int stages,
                                   SliceLatency latency) {
  double sum = 0, slowest = 0;
  int64_t context = 0;
  for (int64_t length : lengths) {
    double t = latency(length, context);
    sum += t;
    slowest = std::max(slowest, t);
    context += length;
  }
  return sum + double(stages - 1) * slowest;
}

namespace {

/// Where slices may start and end: every multiple of the granularity, and
/// the end of the sequence. The dynamic programme works on these positions
/// only ("units"), so a granularity g shrinks it g^2-fold.
struct Positions {
  Positions(int64_t tokens, int64_t granularity) {
    for (int64_t p = 0; p < tokens; p += granularity)
      at.push_back(p);
    at.push_back(tokens);
  }
  int64_t units() const { return int64_t(at.size()) - 1; }
  std::vector<int64_t> at;
};

/// The table of t(length, context) the dynamic programme reads, by the end
/// of the slice in units: row `end` holds the latency of the slice of k
/// units ending there, k = 1..min(end, maxUnits), at index k - 1,
/// contiguous for the inner loop.
class LatencyTable {
public:
  LatencyTable(const Positions &positions, int64_t maxUnits,
               SliceLatency latency) {
    int64_t units = positions.units();
    rows.resize(units + 1);
    for (int64_t end = 1; end <= units; ++end) {
      int64_t longest = std::min(end, maxUnits);
      rows[end].resize(longest);
      for (int64_t k = 1; k <= longest; ++k) {
        int64_t start = positions.at[end - k];
        rows[end][k - 1] = latency(positions.at[end] - start, start);
      }
    }
  }
  const std::vector<double> &row(int64_t end) const { return rows[end]; }
  int64_t units() const { return int64_t(rows.size()) - 1; }

private:
  std::vector<std::vector<double>> rows;
};

/// Algorithm 1: S*(L; bound), the least sum of slice latencies with every
/// slice's at most `bound`, and its slicing. With a slice count the table
/// gains that dimension: best[c][i] is the least sum over prefixes of i
/// units cut into c slices.
struct BoundedDP {
  std::vector<std::vector<double>> best;
  std::vector<std::vector<int64_t>> choice;

  /// The least sum (infinity: no slicing within the bound).
  double run(const LatencyTable &table, double bound, int64_t slices) {
    int64_t units = table.units(), layers = slices ? slices : 1;
    best.assign(layers + 1, std::vector<double>(units + 1, kInfinity));
    choice.assign(layers + 1, std::vector<int64_t>(units + 1, 0));
    best[0][0] = 0;
    for (int64_t c = 1; c <= layers; ++c) {
      // Without a count, one layer that extends itself: best[1] reads
      // best[1] (any number of slices), seeded by the empty prefix.
      const std::vector<double> &from = slices ? best[c - 1] : best[1];
      if (!slices)
        best[1][0] = 0;
      for (int64_t end = 1; end <= units; ++end) {
        const std::vector<double> &row = table.row(end);
        double bestHere = kInfinity;
        int64_t chosen = 0;
        for (int64_t k = 1; k <= int64_t(row.size()); ++k) {
          double t = row[k - 1];
          if (t > bound)
            continue;
          double total = from[end - k] + t;
          if (total < bestHere) {
            bestHere = total;
            chosen = k;
          }
        }
        best[c][end] = bestHere;
        choice[c][end] = chosen;
      }
    }
    return best[layers][units];
  }

  /// The slicing of the last run, in tokens.
  std::vector<int64_t> lengths(const Positions &positions,
                               int64_t slices) const {
    std::vector<int64_t> result;
    int64_t c = slices ? slices : 1;
    for (int64_t end = positions.units(); end > 0;) {
      int64_t k = choice[c][end];
      result.push_back(positions.at[end] - positions.at[end - k]);
      end -= k;
      if (slices)
        --c;
    }
    std::reverse(result.begin(), result.end());
    return result;
  }
};

} // namespace

/// Makes `lengths` the result if its pipeline latency is lower.
static void keepIfFaster(Slicing &result, std::vector<int64_t> lengths,
                         int stages, SliceLatency latency) {
  double total = getPipelineLatency(lengths, stages, latency);
  if (total < result.latency) {
    result.latency = total;
    result.lengths = std::move(lengths);
  }
}

/// The best of a few uniform slicings on the granularity: `slices` equal
/// ones if a count is given, else 1, 2, ... up to one per unit.
static Slicing getUniformBound(int64_t tokens, int stages, int64_t granularity,
                               SliceLatency latency, int64_t slices) {
  Slicing result;
  if (slices) {
    // A given count: start from the uniform slicing of that count (with a
    // granularity it may come out shorter; the DP then finds none better
    // or one of the count).
    result.lengths = slices <= tokens ? getUniformLengths(tokens, slices)
                                      : std::vector<int64_t>{tokens};
  } else {
    result.lengths = {tokens};
  }
  result.latency = getPipelineLatency(result.lengths, stages, latency);
  for (int64_t count = 2; count <= tokens && !slices;
       count = std::max(count + 1, count * 5 / 4)) {
    // Equal slices on the granularity, the last taking the rest.
    int64_t each = (tokens + count - 1) / count;
    each = (each + granularity - 1) / granularity * granularity;
    std::vector<int64_t> lengths;
    for (int64_t left = tokens; left > 0; left -= lengths.back())
      lengths.push_back(std::min(each, left));
    keepIfFaster(result, std::move(lengths), stages, latency);
  }
  return result;
}

Slicing slicing::solveTeraPipe(int64_t tokens, SliceLatency latency,
                               const TeraPipeOptions &options) {
  if (tokens < 1)
    return Slicing();
  int stages = std::max(options.stages, 1);
  int64_t granularity = std::max<int64_t>(options.granularity, 1);
  Positions positions(tokens, granularity);
  // An upper bound to start from: the best of a few uniform slicings (any
  // slicing's latency bounds the optimum, and a tight bound prunes the
  // table and the search below).
  Slicing result =
      getUniformBound(tokens, stages, granularity, latency, options.slices);

  // A slice of latency t makes the whole at least stages * t, so only
  // slices with t <= best / stages can be part of a better slicing: their
  // lengths bound the table. t(k, 0) grows with k, and context only adds.
  int64_t units = positions.units(), maxUnits = units;
  for (int64_t k = 1; k <= units; ++k)
    if (double(stages) * latency(positions.at[k], 0) > result.latency) {
      maxUnits = std::max<int64_t>(k - 1, 1);
      break;
    }
  LatencyTable table(positions, maxUnits, latency);

  // The candidate bounds: every slice latency that can be the slowest of a
  // better slicing, sorted.
  std::vector<double> candidates;
  for (int64_t end = 1; end <= units; ++end)
    for (double t : table.row(end))
      if (double(stages) * t <= result.latency)
        candidates.push_back(t);
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()),
                   candidates.end());
  if (candidates.empty())
    return result;

  // §3.3 enumerates the bounds in increasing order and solves S*(L; t_max)
  // for each. Instead, intervals of candidates are searched: any slicing
  // whose slowest slice lies in [c_lo, c_hi] sums to at least S*(c_hi) and
  // costs at least S*(c_hi) + (stages - 1) c_lo, so one DP at c_hi rules out
  // a whole interval that cannot beat the best found, and splits the rest.
  // The optimum is the same -- every candidate is covered -- with far fewer
  // DPs (the enumeration needs one per bound, and the bounds multiply as
  // latencies grow with the sequence). An interval narrower than epsilon
  // is not split: the answer is then within stages * epsilon of the
  // optimum, as with TeraPipe's skipped bounds.
  BoundedDP dp;
  double epsilon = std::max(options.epsilon, 0.0);
  std::vector<std::pair<size_t, size_t>> pending = {{0, candidates.size() - 1}};
  while (!pending.empty()) {
    auto [lo, hi] = pending.back();
    pending.pop_back();
    if (double(stages) * candidates[lo] > result.latency)
      continue; // every slicing here has a slice too slow
    ++result.boundsEvaluated;
    double sum = dp.run(table, candidates[hi], options.slices);
    if (sum == kInfinity)
      continue; // nothing fits under c_hi, so nothing under lower bounds
    std::vector<int64_t> lengths = dp.lengths(positions, options.slices);
    keepIfFaster(result, std::move(lengths), stages, latency);
    if (sum + double(stages - 1) * candidates[lo] >= result.latency)
      continue;
    if (lo == hi || candidates[hi] - candidates[lo] <= epsilon)
      continue;
    size_t mid = lo + (hi - lo) / 2;
    // The lower half last: searched first, it tightens the best soonest.
    pending.push_back({mid + 1, hi});
    pending.push_back({lo, mid});
  }
  return result;
}

Slicing slicing::solveExhaustively(int64_t tokens, int stages,
                                   SliceLatency latency) {
  Slicing result;
  result.latency = kInfinity;
  if (tokens < 1 || tokens > 30)
    return result;
  // Bit b of `cuts` set: a slice ends after token b + 1.
  for (uint64_t cuts = 0; cuts < (uint64_t(1) << (tokens - 1)); ++cuts) {
    std::vector<int64_t> lengths;
    int64_t start = 0;
    for (int64_t b = 0; b < tokens - 1; ++b)
      if (cuts >> b & 1) {
        lengths.push_back(b + 1 - start);
        start = b + 1;
      }
    lengths.push_back(tokens - start);
    keepIfFaster(result, std::move(lengths), stages, latency);
  }
  return result;
}

JointSlicing slicing::solveTeraPipeJoint(int64_t batch, int64_t tokens,
                                         BatchSliceLatency latency,
                                         const TeraPipeOptions &options) {
  JointSlicing result;
  if (batch < 1 || tokens < 1)
    return result;
  // T_b and its slicing for every part size.
  std::vector<Slicing> perSize(batch + 1);
  for (int64_t b = 1; b <= batch; ++b)
    perSize[b] = solveTeraPipe(
        tokens,
        [&](int64_t length, int64_t context) {
          return latency(b, length, context);
        },
        options);
  // The knapsack: best[n] = min over the last part b of best[n - b] + T_b.
  std::vector<double> best(batch + 1, kInfinity);
  std::vector<int64_t> last(batch + 1, 0);
  best[0] = 0;
  for (int64_t n = 1; n <= batch; ++n)
    for (int64_t b = 1; b <= n; ++b)
      if (best[n - b] + perSize[b].latency < best[n]) {
        best[n] = best[n - b] + perSize[b].latency;
        last[n] = b;
      }
  result.latency = best[batch];
  for (int64_t n = batch; n > 0; n -= last[n]) {
    result.batchSplit.push_back(last[n]);
    result.tokenSlices.push_back(perSize[last[n]].lengths);
  }
  std::reverse(result.batchSplit.begin(), result.batchSplit.end());
  std::reverse(result.tokenSlices.begin(), result.tokenSlices.end());
  return result;
}

LatencyModel LatencyModel::fit(std::vector<double> base,
                               llvm::ArrayRef<std::array<double, 3>> samples) {
  LatencyModel model;
  model.base = std::move(base);
  // Normal equations of t_ctx = a0 + a1 i + a2 j + a3 ij (4 x 4).
  double m[4][5] = {};
  int rows = 0;
  for (const auto &[i, j, seconds] : samples) {
    int64_t length = int64_t(i);
    if (length < 1 || length > int64_t(model.base.size()))
      continue;
    double ctx = seconds - model.base[length - 1];
    double x[4] = {1.0, i, j, i * j};
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 4; ++c)
        m[r][c] += x[r] * x[c];
      m[r][4] += x[r] * ctx;
    }
    ++rows;
  }
  if (rows > 0) {
    // Gaussian elimination with partial pivoting; a feature that never
    // varies (say, no context at all) keeps coefficient 0.
    int row[4] = {0, 1, 2, 3};
    for (int col = 0; col < 4; ++col) {
      int pivot = col;
      for (int r = col + 1; r < 4; ++r)
        if (std::fabs(m[row[r]][col]) > std::fabs(m[row[pivot]][col]))
          pivot = r;
      std::swap(row[col], row[pivot]);
      double p = m[row[col]][col];
      if (std::fabs(p) < 1e-300)
        continue;
      for (int r = 0; r < 4; ++r) {
        if (r == col)
          continue;
        double f = m[row[r]][col] / p;
        for (int c = col; c < 5; ++c)
          m[row[r]][c] -= f * m[row[col]][c];
      }
    }
    for (int col = 0; col < 4; ++col) {
      double p = m[row[col]][col];
      model.a[col] = std::fabs(p) < 1e-300 ? 0.0 : m[row[col]][4] / p;
    }
  }
  double sum = 0;
  int counted = 0;
  for (const auto &[i, j, seconds] : samples)
    if (j > 0 && seconds > 0 && i >= 1 && i <= double(model.base.size())) {
      double error =
          std::fabs(model(int64_t(i), int64_t(j)) - seconds) / seconds;
      model.maxRelativeError = std::max(model.maxRelativeError, error);
      sum += error;
      ++counted;
    }
  model.relativeError = counted ? sum / counted : 0.0;
  return model;
}

double LatencyModel::operator()(int64_t length, int64_t context) const {
  double i = double(length), j = double(context);
  double t0 = base.empty()
                  ? 0.0
                  : base[std::clamp<int64_t>(length, 1, base.size()) - 1];
  if (context == 0)
    return t0;
  return t0 + a[0] + a[1] * i + a[2] * j + a[3] * i * j;
}

std::vector<int64_t> slicing::getUniformLengths(int64_t tokens,
                                                int64_t slices) {
  std::vector<int64_t> lengths(slices, tokens / slices);
  for (int64_t i = 0; i < tokens % slices; ++i)
    ++lengths[i];
  return lengths;
}

/// Cuts `tokens` greedily into segments of cost at most `target`; returns
/// how many it takes (the last segment taking what remains).
static int64_t cutGreedily(int64_t tokens, double target, SliceLatency cost,
                           std::vector<int64_t> &lengths) {
  lengths.clear();
  int64_t prefix = 0;
  while (prefix < tokens) {
    // The longest length within the target (at least one token), by
    // bisection: cost grows with the length.
    int64_t lo = 1, hi = tokens - prefix;
    if (cost(hi, prefix) <= target) {
      lo = hi;
    } else {
      while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (cost(mid, prefix) <= target)
          lo = mid;
        else
          hi = mid - 1;
      }
    }
    lengths.push_back(lo);
    prefix += lo;
  }
  return int64_t(lengths.size());
}

std::vector<int64_t> slicing::solveEqualCost(int64_t tokens, int64_t slices,
                                             SliceLatency cost) {
  if (slices <= 1 || tokens <= slices)
    return getUniformLengths(tokens, std::max<int64_t>(slices, 1));
  // The smallest common cost at which a greedy cut needs at most `slices`
  // segments: every segment then costs about the same, the last taking
  // the remainder.
  double lo = 0, hi = cost(tokens, 0);
  std::vector<int64_t> lengths;
  for (int iteration = 0; iteration < 200 && hi - lo > 1e-12 * hi;
       ++iteration) {
    double mid = 0.5 * (lo + hi);
    if (cutGreedily(tokens, mid, cost, lengths) <= slices)
      hi = mid;
    else
      lo = mid;
  }
  cutGreedily(tokens, hi, cost, lengths);
  // Fewer segments than asked (a very short sequence): split the longest.
  while (int64_t(lengths.size()) < slices) {
    auto longest = std::max_element(lengths.begin(), lengths.end());
    int64_t half = *longest / 2;
    *longest -= half;
    lengths.insert(longest + 1, half);
  }
  return lengths;
}

std::string slicing::checkSlicing(int64_t tokens,
                                  llvm::ArrayRef<int64_t> lengths) {
  if (lengths.empty())
    return "a slicing needs at least one slice";
  int64_t sum = 0;
  for (int64_t length : lengths) {
    if (length < 1)
      return "slice lengths must be positive, got " + std::to_string(length);
    sum += length;
  }
  if (sum != tokens)
    return "slice lengths sum to " + std::to_string(sum) +
           ", the sequence has " + std::to_string(tokens) + " tokens";
  return "";
}
