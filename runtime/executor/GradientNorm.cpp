//===- GradientNorm.cpp - Each parameter once in the global norm ----------===//

#include "GradientNorm.h"

#include <algorithm>

namespace sluice::rt {

Status GradientNormPlan::plan(
    const Plan &plan, const ParameterStore &parameters, int deviceIndex,
    int shardIndex, const std::vector<int> &tiedGroup,
    const std::vector<TensorGroupSums::ReplicatedKeyValues> &shared,
    const std::vector<IndexRange> *owned, Device &device) {
  // Under expert parallelism the members of an expert group hold the
  // same gradients but their own experts', and the executor sums the norm
  // over the group: every other tensor counts 1 / ep on each member. (With
  // ZeRO-1 each replica's parts are its own already, summed over all.)
  double alike = plan.ep > 1 && !owned ? 1.0 / double(plan.ep) : 1.0;
  std::vector<Part> whole;
  for (const ParameterSpec &spec : parameters.specs()) {
    bool tiedCopy = spec.name == "embed.tokens" && !tiedGroup.empty() &&
                    deviceIndex != tiedGroup.front();
    bool shardCopy =
        plan.tp > 1 && shardIndex != 0 && !spec.isSlice() && !spec.isShard();
    if (tiedCopy || shardCopy)
      continue;
    int64_t at = parameters.offset(spec.name);
    double weight =
        spec.expertShare ? 1.0 : alike;
    if (!whole.empty() && whole.back().rows == 1 &&
        whole.back().weight == weight &&
        whole.back().offset + whole.back().cols == at)
      whole.back().cols += spec.size();
    else
      whole.push_back({at, 1, spec.size(), spec.size(), weight});
  }
  for (const TensorGroupSums::ReplicatedKeyValues &r : shared) {
    if (r.group.front() == shardIndex)
      continue;
    int64_t width = r.queries + r.keyValues;
    whole.push_back({parameters.offset(r.weight) + r.queries,
                     plan.model.hidden, r.keyValues, width, -alike});
    if (!r.bias.empty())
      whole.push_back({parameters.offset(r.bias) + r.queries, 1,
                       r.keyValues, r.keyValues, -alike});
  }
  parts = owned ? pack(whole, *owned) : std::move(whole);
  return device.allocate(DType::F64, 1, sum);
}

std::vector<GradientNormPlan::Part>
GradientNormPlan::pack(const std::vector<Part> &parts,
                       const std::vector<IndexRange> &owned) {
  std::vector<Part> packed;
  int64_t packedAt = 0;
  for (const IndexRange &range : owned) {
    int64_t lo = range.first, hi = range.first + range.count;
    for (const Part &part : parts)
      for (int64_t row = 0; row < part.rows; ++row) {
        int64_t begin = part.offset + row * part.stride;
        int64_t from = std::max(lo, begin),
                to = std::min(hi, begin + part.cols);
        if (from >= to)
          continue;
        int64_t local = packedAt + (from - lo);
        Part *last = packed.empty() ? nullptr : &packed.back();
        bool wholeRow = to - from == part.cols;
        if (wholeRow && last && last->cols == part.cols &&
            last->stride == part.stride && last->weight == part.weight &&
            last->offset + last->rows * last->stride == local)
          ++last->rows;
        else
          packed.push_back({local, 1, to - from,
                            wholeRow ? part.stride : to - from, part.weight});
      }
    packedAt += range.count;
  }
  return packed;
}

Status GradientNormPlan::sumSquares(Device &device, DevicePtr grads,
                                    double &out) {
  Kernels &kernels = device.getKernels(StreamKind::Compute);
  Stream &compute = device.getStream(StreamKind::Compute);
  kernels.fill(sum.get(), 0.0, 1);
  for (const Part &p : parts)
    kernels.sumSquares(grads + p.offset, p.rows, p.cols, p.stride, p.weight,
                       sum.get());
  out = 0;
  device.download(&out, sum.get(), sizeof(double), compute);
  return compute.synchronize();
}

} // namespace sluice::rt
