//===- StagedKernels.cpp - bf16 plans on the fp32 CPU kernels -------------===//

#include "StagedKernels.h"

#include <algorithm>
#include <vector>

namespace sluice::rt {

namespace {

/// One kernel call's bf16 arrays as fp32: in() and io() return what the
/// fp32 kernel reads (the array itself unless it is bf16), io()'s are
/// rounded back when the stage ends. The same array named twice is staged
/// once, so an in-place call stays in place. `count` is the array's extent
/// from the pointer: the last element the kernel touches, plus one.
class Stage {
public:
  ~Stage() {
    for (const Array &a : arrays)
      if (a.written) {
        uint16_t *to = a.original.as<uint16_t>();
        for (size_t i = 0; i < a.values.size(); ++i)
          to[i] = floatToBf16(a.values[i]);
      }
  }
  DevicePtr in(DevicePtr p, int64_t count) { return stage(p, count, false); }
  DevicePtr io(DevicePtr p, int64_t count) { return stage(p, count, true); }

private:
  struct Array {
    DevicePtr original;
    std::vector<float> values;
    bool written;
  };
  DevicePtr stage(DevicePtr p, int64_t count, bool written) {
    if (!p || p.getType() != DType::BF16 || count <= 0)
      return p;
    for (Array &a : arrays)
      if (a.original.get() == p.get()) {
        if (int64_t(a.values.size()) < count)
          grow(a, count);
        a.written = a.written || written;
        return DevicePtr(a.values.data());
      }
    arrays.push_back({p, {}, written});
    grow(arrays.back(), count);
    return DevicePtr(arrays.back().values.data());
  }
  static void grow(Array &a, int64_t count) {
    const uint16_t *from = a.original.as<uint16_t>();
    size_t had = a.values.size();
    a.values.resize(size_t(count));
    for (size_t i = had; i < a.values.size(); ++i)
      a.values[i] = bf16ToFloat(from[i]);
  }
  // Moving an Array keeps its values' buffer, so the pointers handed out
  // stay valid as `arrays` grows; a call names an array once (or again
  // with no larger extent), so none is regrown after its pointer is out.
  std::vector<Array> arrays;
};

/// Rows x cols of a matrix with leading dimension ld.
int64_t extent(int64_t rows, int64_t cols, int64_t ld) {
  return rows <= 0 || cols <= 0 ? 0 : (rows - 1) * ld + cols;
}

/// One past the largest token id of a rows x length window (the table
/// rows an embedding touches).
int64_t tableRows(DevicePtr tokens, int64_t stride, int64_t rows,
                  int64_t length) {
  int64_t most = -1;
  const int32_t *t = tokens.as<int32_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < length; ++i)
      most = std::max<int64_t>(most, t[r * stride + i]);
  return most + 1;
}

/// The elements of a query-shaped and a key/value-shaped attention array.
int64_t queryElements(const AttentionShape &s) {
  return s.rows * s.tokens * s.heads * s.headDim;
}
/// A cache's rows, or a key block's (its last row ends at its last key).
int64_t keyRows(const AttentionShape &s) {
  return s.isKeyBlock() ? (s.rows - 1) * s.seqLen + s.keyCount
                        : s.rows * s.seqLen;
}
int64_t cacheElements(const AttentionShape &s) {
  return keyRows(s) * s.kvHeads * s.headDim;
}
/// The same of the value heads' arrays: the values and the context.
int64_t valueCacheElements(const AttentionShape &s) {
  return keyRows(s) * s.kvHeads * s.getValueDim();
}
int64_t contextElements(const AttentionShape &s) {
  return s.rows * s.tokens * s.heads * s.getValueDim();
}

/// The span of one side of a strided copy, from its pointer.
int64_t stridedSpan(const StridedCopy &c, int64_t batch, int64_t row) {
  if (c.batches <= 0 || c.rows <= 0 || c.cols <= 0)
    return 0;
  return (c.batches - 1) * batch + (c.rows - 1) * row + c.cols;
}

} // namespace

// Each kernel of the list: its staged arrays (Kernels.def's STAGING)
// rebound to their fp32 copies, then the fp32 kernel on them; the copies
// of what it wrote are rounded back when `stage` ends.
#define IN(p, count) p = stage.in(p, count);
#define IO(p, count) p = stage.io(p, count);
#define SLUICE_KERNEL(NAME, PARAMS, ARGS, STAGING)                             \
  void StagedKernels::NAME PARAMS {                                            \
    Stage stage;                                                               \
    STAGING                                                                    \
    fp32.NAME ARGS;                                                            \
  }
#include "Kernels.def"
#undef IN
#undef IO

} // namespace sluice::rt
