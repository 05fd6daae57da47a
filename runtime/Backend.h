//===- Backend.h - What the executor needs from a device --------*- C++ -*-===//
//
// The executor and the layers talk to a device only through these
// interfaces, so the CPU and the CUDA backends implement them without
// touching the executor:
//
//  * Device: owned, typed memory (DeviceBuffer) from the backend's
//    allocator; three streams -- compute, pipeline communication and a
//    high-priority vocabulary stream (Yeung et al., 2024
//    §6.1: the vocabulary collectives overlap transformer compute);
//    events; host <-> device copies; and Kernels bound to each stream.
//  * Kernels: the math of every pass on device memory. Each call is
//    enqueued on the kernels' stream (on the CPU it runs at once). Tensors
//    are typed pointers (DevicePtr); which operand takes which type is
//    said per method, in the terms of DType.h: "act" is the run's
//    activation type (bf16 or fp32), "f32" always fp32.
//  * Communicator: point-to-point and collective communication of typed
//    device memory, ordered on a stream. Every transfer returns a Request;
//    a consumer orders its stream after it with Request::waitOn.
//
// Ordering: work on one stream runs in issue order. Across streams the
// executor orders explicitly -- Stream::wait(event) makes a stream wait
// for an event another stream recorded -- so the host only ever waits for
// the device once per step (and where a host transport such as MPI must
// see data).
//
// Ownership: a DeviceBuffer owns its memory and returns it to its Device;
// DevicePtrs never own. A backend keeps no pointer beyond a call except a
// Request's buffers until it completes: a send's source must not be
// written, and a receive's destination not read, before Request::waitOn.
// Threading: one executor thread drives a device and its communicator.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_BACKEND_H
#define SLUICE_RUNTIME_BACKEND_H

#include "Status.h"
#include "sluice/PlanFormat/DType.h"
#include "sluice/PlanFormat/ModelConfig.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sluice::rt {

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// A typed pointer into device memory; never owns. Arithmetic counts
/// elements of its type.
class DevicePtr {
public:
  DevicePtr() = default;
  DevicePtr(void *data, DType type) : data(data), type(type) {}
  // Host pointers of the CPU backend (and of tests) convert implicitly.
  DevicePtr(float *data) : data(data), type(DType::F32) {}
  DevicePtr(const float *data)
      : data(const_cast<float *>(data)), type(DType::F32) {}
  DevicePtr(int32_t *data) : data(data), type(DType::I32) {}
  DevicePtr(const int32_t *data)
      : data(const_cast<int32_t *>(data)), type(DType::I32) {}
  DevicePtr(double *data) : data(data), type(DType::F64) {}
  DevicePtr(std::nullptr_t) {}

  void *get() const { return data; }
  DType getType() const { return type; }
  explicit operator bool() const { return data != nullptr; }
  /// The memory as T; the CPU backend reads fp32 through f32().
  template <class T> T *as() const { return static_cast<T *>(data); }
  float *f32() const { return as<float>(); }
  int32_t *i32() const { return as<int32_t>(); }

  DevicePtr operator+(int64_t elements) const {
    if (!data)
      return {};
    return {static_cast<char *>(data) + elements * getSize(type), type};
  }
  /// The same memory, `bytes` further on, as `to` (carving typed regions
  /// out of a byte buffer: Layout.h).
  DevicePtr atByte(int64_t bytes, DType to) const {
    return {static_cast<char *>(data) + bytes, to};
  }

private:
  void *data = nullptr;
  DType type = DType::F32;
};

class Device;

/// Device memory of `count` elements of one type, owned: returned to its
/// device when destroyed. Zero-filled when allocated.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(Device *owner, void *data, DType type, int64_t count)
      : owner(owner), data(data), type(type), count(count) {}
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  DeviceBuffer(DeviceBuffer &&other) noexcept { *this = std::move(other); }
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  ~DeviceBuffer() { reset(); }

  /// Returns the memory to the device now.
  void reset();
  DevicePtr get() const { return {data, type}; }
  /// The same memory seen as another type (a byte arena's regions).
  DevicePtr as(DType to) const { return {data, to}; }
  DType getType() const { return type; }
  int64_t size() const { return count; }
  int64_t getBytes() const { return count * getSize(type); }
  bool empty() const { return data == nullptr; }

private:
  Device *owner = nullptr;
  void *data = nullptr;
  DType type = DType::F32;
  int64_t count = 0;
};

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

enum class StreamKind : uint8_t {
  Compute,    // every pass
  Pipeline,   // sends and receives between stages
  Vocabulary, // the vocabulary shards' collectives, high priority
  Data,       // the data-parallel gradient sums, beside the backward passes
  Context,    // ring attention's transfers, beside attention's compute
  Tensor,     // the tensor-parallel group's collectives, beside the weight
              // gradients' GEMMs (TensorGroupSums)
};
constexpr int kStreamKinds = 6;

class Event;

/// An in-order queue of device work.
class Stream {
public:
  virtual ~Stream() = default;
  /// Work enqueued after this call waits until `event` has happened.
  virtual void wait(Event &event) = 0;
  /// Blocks the host until everything enqueued so far has run; reports a
  /// failure of any of it.
  virtual Status synchronize() = 0;
};

/// A stream whose work runs when it is enqueued (host memory: the CPU
/// backend's streams, and the one MPI is given for pinned staging buffers),
/// so every ordering holds already.
class HostStream final : public Stream {
public:
  void wait(Event &) override {}
  Status synchronize() override { return Status::ok(); }
};

/// A point in a stream's work.
class Event {
public:
  virtual ~Event() = default;
  /// Marks the current end of `stream`'s work.
  virtual void record(Stream &stream) = 0;
  /// Whether the work before the recorded point has run (never blocks).
  virtual bool isComplete() = 0;
  /// Seconds between `start` and this event, both recorded and complete.
  virtual double secondsSince(Event &start) = 0;
};

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Adam, or AdamW with a weight decay: w -= lr * (mhat / (sqrt(vhat) +
/// eps) + weightDecay * w), the decoupled decay of Loshchilov and Hutter
/// (torch.optim.AdamW). ParameterStore applies the decay to matrices only,
/// never to norms' gains or biases (Megatron-LM's and transformers'
/// Trainer's rule).
struct AdamConfig {
  float learningRate = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float weightDecay = 0.0f;
  /// Multiplies every gradient before the update: gradient clipping's
  /// factor (getClipScale), 1 when the norm is within bounds.
  float gradientScale = 1.0f;
};

/// The factor gradient clipping by global norm multiplies the gradients
/// by: min(1, maxNorm / (norm + 1e-6)), as torch.nn.utils.clip_grad_norm_
/// and Megatron-LM compute it; 1 when clipping is off (maxNorm <= 0).
inline float getClipScale(double norm, double maxNorm) {
  if (maxNorm <= 0)
    return 1.0f;
  return float(std::min(1.0, maxNorm / (norm + 1e-6)));
}

/// The learning rate of each optimizer step: a linear warmup to `peak`
/// over `warmup` steps, then a linear or cosine decay to `minimum` at
/// step `decaySteps` (held there after), or constant (Megatron-LM's
/// --lr-warmup-iters, --lr-decay-style, --lr-decay-iters, --min-lr).
struct LearningRateSchedule {
  enum class Decay { None, Linear, Cosine };
  float peak = 1e-3f;
  int64_t warmup = 0;
  Decay decay = Decay::None;
  int64_t decaySteps = 0;
  float minimum = 0.0f;

  /// A decay's name as --lr-decay and checkpoints spell it.
  static const char *getDecayName(Decay d) {
    return d == Decay::Linear   ? "linear"
           : d == Decay::Cosine ? "cosine"
                                : "none";
  }
  /// The decay named `name`; false for another name.
  static bool parseDecay(const std::string &name, Decay &out) {
    return parseByName(name, {Decay::None, Decay::Linear, Decay::Cosine},
                       getDecayName, out);
  }

  /// The rate of optimizer step `step`, counted from 1: warmup's first
  /// step already moves (peak / warmup), as Megatron-LM's does.
  float at(int64_t step) const {
    if (warmup > 0 && step <= warmup)
      return peak * float(step) / float(warmup);
    if (decay == Decay::None || decaySteps <= warmup)
      return peak;
    double progress =
        std::min(1.0, double(step - warmup) / double(decaySteps - warmup));
    double share = decay == Decay::Linear
                       ? 1.0 - progress
                       : 0.5 * (1.0 + std::cos(M_PI * progress));
    return float(minimum + (peak - minimum) * share);
  }
};

/// Attention over one token slice: `tokens` queries at positions
/// [offset, offset + tokens) attend causally to keys [0, offset + tokens)
/// of the same row (a bottom-right causal mask). Q and context are
/// [rows, tokens, heads, headDim]; the key/value caches [rows, seqLen,
/// kvHeads, headDim]; the log-sum-exp [rows, heads, tokens]. Grouped-query
/// attention: query head h reads key/value head h / (heads / kvHeads), so
/// each key/value head serves a group of consecutive query heads (kvHeads
/// == heads is ordinary multi-head attention).
/// `scale` multiplies the scores (0: 1 / sqrt(headDim); Gemma-2:
/// query_pre_attn_scalar^-0.5); `softcap` caps them to softcap *
/// tanh(score / softcap) before the softmax (Gemma-2; 0: none).
/// `window` > 0 makes the attention a sliding window (Mistral, Gemma-2):
/// the query at position p attends to keys p - window < j <= p only.
struct AttentionShape {
  int64_t rows, tokens, offset, seqLen, heads, headDim, kvHeads;
  float scale = 0.0f;
  float softcap = 0.0f;
  int64_t window = 0;
  /// A value head's size (the context's per head); 0: headDim.
  int64_t valueDim = 0;
  int64_t getValueDim() const { return valueDim > 0 ? valueDim : headDim; }
  /// The first key the query at position `position` attends to.
  int64_t getFirstKey(int64_t position) const {
    return window > 0 && position >= window ? position - window + 1 : 0;
  }
  /// Whether the window leaves out any key of this slice's queries.
  bool isWindowed() const { return window > 0 && offset + tokens > window; }
  /// A key block (ring attention, Liu et al., 2023, section 3): the keys
  /// and values given hold positions [keyBegin, keyBegin + keyCount), rows
  /// seqLen apart, and a query sees those of them the mask lets it (none:
  /// lse -inf and a zero context, which attentionMerge folds away).
  /// keyCount 0: a cache holding positions [0, offset + tokens).
  int64_t keyBegin = 0, keyCount = 0;
  /// B adds into dq instead of writing it: a query's gradient summed over
  /// the key blocks it saw.
  bool accumulateQueries = false;
  bool isKeyBlock() const { return keyCount > 0; }
  /// The positions past the last key given.
  int64_t getKeyEnd() const {
    return isKeyBlock() ? keyBegin + keyCount : offset + tokens;
  }
  /// The keys [first, end) the query at `position` sees among those given.
  std::pair<int64_t, int64_t> getVisibleKeys(int64_t position) const {
    int64_t first = std::max(getFirstKey(position), keyBegin);
    int64_t end = std::min(position + 1, getKeyEnd());
    return {first, std::max(first, end)};
  }
};

/// The scores' factor of `s`.
inline float getAttentionScale(const AttentionShape &s) {
  return s.scale > 0 ? s.scale : 1.0f / std::sqrt(float(s.headDim));
}

/// A batch of row blocks: for b < batches, r < rows, c < cols,
/// dst[b * dstBatch + r * dstRow + c] = src[b * srcBatch + r * srcRow + c]
/// (strides in elements).
struct StridedCopy {
  int64_t batches, rows, cols;
  int64_t srcBatch, srcRow, dstBatch, dstRow;
};

/// A feed-forward block's nonlinearity: SiLU (SwiGLU, Llama), GELU's tanh
/// approximation (GPT-2's `gelu_new`, Gemma's `gelu_pytorch_tanh`) or the
/// exact GELU x * Phi(x) (Hugging Face's `gelu`).
enum class GateActivation { Silu, Gelu, GeluErf };

/// One tensor's delayed scaling (Transformer Engine's recipe;
/// docs/precision.md), kFp8RecordFloats fp32 values in device memory:
/// [0] the scale this step's calls quantize by (0: none yet -- each call
/// scales by its own operand's amax, "current" scaling, as the first
/// step does); [1] the amax of the step so far (max |x| over every call);
/// [2] the format's largest value; [3..] the amax of the last
/// kFp8History steps, newest first. Kernels::updateFp8Scales turns a
/// step's amax into the next step's scale.
constexpr int64_t kFp8History = 16;
constexpr int64_t kFp8RecordFloats = 3 + kFp8History;

/// The part of updateFp8Scales every backend shares, for one record: the
/// step's amax is cleared and, if the step trained and it is a positive
/// finite number, pushed onto the history, whose largest is returned for
/// the backend to turn into the scale; 0 where the scale stays.
#ifdef __CUDACC__
__host__ __device__
#endif
    inline float
    pushFp8Amax(float *record, bool trained) {
  float amax = record[1], *history = record + 3;
  record[1] = 0.0f;
  // Not (amax > 0) also holds for NaN; above FLT_MAX is infinity.
  if (!trained || !(amax > 0.0f) || amax > 3.402823466e38f)
    return 0.0f;
  for (int64_t h = kFp8History - 1; h > 0; --h)
    history[h] = history[h - 1];
  history[0] = amax;
  float largest = 0.0f;
  for (int64_t h = 0; h < kFp8History; ++h)
    largest = history[h] > largest ? history[h] : largest;
  return largest;
}
/// A GEMM operand's quantization: its tensor's record and format, and
/// whether the tensor is `steady`: the same values at every call with
/// this record until the kernels' next updateFp8Scales or adamUpdate (a
/// weight within a step, whichever buffer holds it). A backend may then
/// quantize it once per step and reuse the copy: exact, as every call's
/// copy would be the same (the record's scale is fixed for the step, or
/// while it is 0 the operand's own amax is), and the amax it folds into
/// the record is already there.
struct Fp8Operand {
  DevicePtr record;
  Fp8Format format = Fp8Format::E4M3;
  bool steady = false;
};

/// How a mixture of experts' router turns a token's logits into its k
/// experts and their weights (moeRoute, moeRouteBackward).
struct RouterRule {
  /// The scores: a softmax over the experts (false), or each expert's
  /// sigmoid (DeepSeek-V3).
  bool sigmoid = false;
  /// The k chosen scores renormalised to sum to 1.
  bool normalize = false;
  /// The weights' factor after any renormalisation (routed_scaling_factor).
  float scale = 1.0f;
  /// Group-limited routing: the experts in `groups` equal groups, the k
  /// chosen among the `topGroups` best (a group's score: its best expert's
  /// under softmax, its two best's sum under sigmoid); 0 or 1: no groups.
  int64_t groups = 0, topGroups = 0;
  /// f32 [experts], added to the scores for the choice only (the weights
  /// are the scores themselves); null: none.
  DevicePtr bias;
};

class Kernels {
public:
  virtual ~Kernels() = default;

  /// The kernels of the list, by name (Kernels::Id::gemm, ...).
  enum class Id {
#define SLUICE_KERNEL(NAME, PARAMS, ARGS, STAGING) NAME,
#include "Kernels.def"
  };
  static constexpr int kCount = 0
#define SLUICE_KERNEL(NAME, PARAMS, ARGS, STAGING) +1
#include "Kernels.def"
      ;
  /// The kernel's name in the list ("gemmFp8").
  static const char *getName(Id id) {
    static const char *const names[] = {
#define SLUICE_KERNEL(NAME, PARAMS, ARGS, STAGING) #NAME,
#include "Kernels.def"
    };
    return names[int(id)];
  }
  /// Whether this backend runs kernel `id` in `precision` (ggml's
  /// supports_op). A backend that lacks a kernel says so here: the
  /// session asks for every kernel a plan needs when it opens the
  /// backend, and refuses the plan by the kernel's name before any work.
  virtual bool supports(Id id, const Precision &precision) const {
    return true;
  }

  // Every kernel of the list, pure virtual (Kernels.def documents each).
#define SLUICE_KERNEL(NAME, PARAMS, ARGS, STAGING) virtual void NAME PARAMS = 0;
#include "Kernels.def"

  // Fused forms of two steps a pre-norm block takes at every residual seam.
  // Each has a default that composes the primitives above, so a backend
  // that does not fuse them still runs every model, and its result is the
  // one a fused form reproduces (the sum rounded to x's type before the
  // norm reads it, as Kernels::add leaves it).

  /// x += residual, then normForward(x, ...): the residual add that ends a
  /// block's half and the norm that opens the next.
  virtual void addNormForward(DevicePtr x, DevicePtr residual, DevicePtr gamma,
                              DevicePtr beta, int64_t rows, int64_t cols,
                              bool rms, float eps, DevicePtr y, DevicePtr xhat,
                              DevicePtr rstd) {
    add(x, residual, rows * cols);
    normForward(x, gamma, beta, rows, cols, rms, eps, y, xhat, rstd);
  }

  /// dx = residual + the norm's input gradient for dy: the residual
  /// branch's gradient joined with the norm's, without first copying it
  /// into dx.
  virtual void normBackwardAdd(DevicePtr dy, DevicePtr xhat, DevicePtr rstd,
                               DevicePtr gamma, int64_t rows, int64_t cols,
                               bool rms, DevicePtr residual, DevicePtr dx) {
    copy(dx, residual, rows * cols);
    normBackward(dy, xhat, rstd, gamma, rows, cols, rms, dx);
  }
};

/// The grouped GEMMs of runtime/Kernels.def as one gemm per group, given
/// the groups' row offsets on the host (groups + 1 of them): each
/// backend's groupedGemm and groupedGemmWeights, which differ only in
/// where the offsets live. An empty group costs nothing (its weight
/// gradient is only scaled by beta).
inline void runGroupedGemm(Kernels &k, const int32_t *offsets, bool transB,
                           int64_t groups, int64_t n, int64_t inner,
                           DevicePtr a, int64_t lda, DevicePtr b, int64_t ldb,
                           int64_t bStride, float beta, DevicePtr c,
                           int64_t ldc) {
  for (int64_t g = 0; g < groups; ++g) {
    int64_t first = offsets[g], count = offsets[g + 1] - first;
    if (count > 0)
      k.gemm(false, transB, count, n, inner, 1.0f, a + first * lda, lda,
             b + g * bStride, ldb, beta, c + first * ldc, ldc);
  }
}
inline void runGroupedGemmWeights(Kernels &k, const int32_t *offsets,
                                  int64_t groups, int64_t m, int64_t n,
                                  DevicePtr a, int64_t lda, DevicePtr b,
                                  int64_t ldb, float beta, DevicePtr c,
                                  int64_t cStride) {
  for (int64_t g = 0; g < groups; ++g) {
    int64_t first = offsets[g], count = offsets[g + 1] - first;
    if (count > 0)
      k.gemm(true, false, m, n, count, 1.0f, a + first * lda, lda,
             b + first * ldb, ldb, beta, c + g * cStride, n);
    else if (beta != 1.0f)
      k.scale(c + g * cStride, beta, m * n);
  }
}

//===----------------------------------------------------------------------===//
// The device
//===----------------------------------------------------------------------===//

class Device {
public:
  virtual ~Device() = default;
  /// "cpu", "cuda:0 (NVIDIA H100 80GB HBM3)".
  virtual std::string describe() const = 0;
  /// Whether kernels run behind the host (a GPU): the host enqueues work
  /// and its clocks do not say when the device was busy.
  virtual bool isAsynchronous() const { return false; }
  /// Whether this backend computes in `precision`.
  virtual bool supports(const Precision &precision) const = 0;

  /// `count` zero-filled elements of `type`.
  virtual Status allocate(DType type, int64_t count, DeviceBuffer &out) = 0;
  /// At least `bytes`, as whole elements of `type`: a buffer whose regions
  /// have several types (Layout.h).
  Status allocateBytes(DType type, int64_t bytes, DeviceBuffer &out) {
    return allocate(type, (bytes + getSize(type) - 1) / getSize(type), out);
  }
  /// Bytes this device can still allocate; -1 where unknown.
  virtual int64_t getFreeBytes() = 0;

  virtual Stream &getStream(StreamKind kind) = 0;
  virtual Kernels &getKernels(StreamKind kind) = 0;
  virtual std::unique_ptr<Event> createEvent() = 0;

  /// Lanes: an overlapped group's forward and backward run on two host
  /// threads (PassLanes.h). A device that runs work asynchronously gives
  /// the backward's lane a compute stream of its own, so that the two
  /// passes' kernels -- and one's all-to-all beside the other's compute
  /// -- run side by side on the device (DeepSeek-AI, 2024, §3.2.1).
  /// openLanes() makes lane 1's stream and kernels (an error where the
  /// device cannot); then, on the thread that calls setLane(1), the
  /// Compute stream and the Compute kernels enqueue on lane 1's stream,
  /// until setLane(0). The same Stream and Kernels objects serve both
  /// lanes, so whatever holds them (a stage's blocks, a communicator)
  /// follows the calling thread's lane. Ordering between the lanes is the
  /// caller's: events recorded on Compute in one lane and waited for in
  /// the other. A host device has one lane; its groups interleave on the
  /// host alone.
  virtual Status openLanes() {
    return Status::error(describe() + " has one compute stream");
  }
  virtual void setLane(int) {}

  /// Host -> device and device -> host copies, ordered on `stream`; the
  /// host memory must stay valid (and, for a download, unread) until the
  /// stream has reached them.
  virtual void upload(DevicePtr dst, const void *host, int64_t bytes,
                      Stream &stream) = 0;
  virtual void download(void *host, DevicePtr src, int64_t bytes,
                        Stream &stream) = 0;

  /// Every stream's work done; the first failure of any of it.
  Status synchronize() {
    for (int k = 0; k < kStreamKinds; ++k)
      if (Status st = getStream(StreamKind(k)).synchronize(); !st)
        return st;
    return Status::ok();
  }

protected:
  friend class DeviceBuffer;
  /// Takes back memory of a buffer (the backend may delay reuse until the
  /// streams that may still read it are past this point).
  virtual void release(void *data, int64_t bytes) = 0;
};

inline DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    reset();
    owner = other.owner;
    data = other.data;
    type = other.type;
    count = other.count;
    other.owner = nullptr;
    other.data = nullptr;
    other.count = 0;
  }
  return *this;
}

inline void DeviceBuffer::reset() {
  if (owner && data)
    owner->release(data, getBytes());
  owner = nullptr;
  data = nullptr;
  count = 0;
}

/// Downloads a whole buffer to the host and waits for it.
template <class T>
Status downloadAll(Device &device, const DeviceBuffer &buffer,
                   std::vector<T> &out) {
  out.resize(buffer.getBytes() / sizeof(T));
  Stream &stream = device.getStream(StreamKind::Compute);
  device.download(out.data(), buffer.get(), buffer.getBytes(), stream);
  return stream.synchronize();
}

//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//

/// A pending non-blocking transfer.
class Request {
public:
  virtual ~Request() = default;
  /// Advances the transfer without blocking; true once the host has
  /// nothing left to do for it (a host transport's data has arrived; a
  /// device transport's operation is enqueued).
  virtual bool test() = 0;
  /// Orders `stream` after the transfer: work enqueued on it from now on
  /// sees a receive's or collective's data, and may overwrite a send's
  /// source. Blocks the host while a host transport (MPI) completes; only
  /// enqueues a wait for a device transport (NCCL).
  virtual Status waitOn(Stream &stream) = 0;
};

/// The combining function of a collective reduction.
enum class Reduction { Sum, Max };

class Communicator {
public:
  /// Independent ordering domains for non-blocking collectives: every rank
  /// issues the collectives of one channel in the same order, but two
  /// channels' collectives may interleave differently on different ranks
  /// (an MPI communicator each; on CUDA an NCCL communicator each). The
  /// vocabulary shards use one channel each: 0 and 1 on a pipeline, 1 and
  /// 2 on a tensor-parallel group, whose channel 0 carries the stages'
  /// sums.
  static constexpr int kChannels = 3;

  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// The largest tag the transport accepts.
  virtual int maxTag() const = 0;

  // The device operations (DeviceCollectives.def documents each).
#define SLUICE_DEVICE_OP_Required = 0;
#define SLUICE_DEVICE_OP_Optional                                              \
  { return nullptr; }
#define SLUICE_DEVICE_OP(NAME, PARAMS, REQUIRED)                               \
  virtual std::unique_ptr<Request> NAME PARAMS SLUICE_DEVICE_OP_##REQUIRED
#include "DeviceCollectives.def"
#undef SLUICE_DEVICE_OP_Required
#undef SLUICE_DEVICE_OP_Optional

  /// Sums `data` over the ranks of `group` (every member calls it) and
  /// returns when `data` holds the sum for work enqueued on `stream`.
  virtual Status allReduceSum(DevicePtr data, int64_t count, const int *group,
                              int groupSize, Stream &stream) = 0;
  /// Host values over every rank.
  virtual Status allReduceSum(double *data, int64_t n) = 0;
  virtual Status allReduceMax(double *data, int64_t n) = 0;
  /// Collects every rank's string on rank 0 (in rank order); other ranks
  /// get an empty list.
  virtual Status gatherToRoot(const std::string &mine,
                              std::vector<std::string> &all) = 0;
  virtual void barrier() = 0;
  /// Ends every rank of the job now, with `code`: one rank's failure stops
  /// the others instead of leaving them waiting for it.
  [[noreturn]] virtual void abort(int code) = 0;
  /// Names the next transfer or collective this rank issues ("send of
  /// stage 2's output, microbatch 3"), for a transport that reports the
  /// operation it is stuck in or that peers disagree on.
  virtual void describeNext(const std::string &what) {}
  /// Says the next operation continues the one that just completed (a
  /// collective's next step, VocabularyShards): NCCL has it issued right
  /// after it, and a transport that orders operations puts it there.
  virtual void continueNext() {}
  /// Opens a group of point-to-point operations: those issued until
  /// endGroup run together, as an NCCL group does (ncclGroupStart/End):
  /// none of them waits for another, and an operation issued after the
  /// group waits for all of them. The executor groups the sends and
  /// receives that are adjacent in its order, so that a receive needed
  /// now does not queue behind a send to the other neighbour. A transport
  /// whose operations never wait for one another (MPI's) ignores it, and
  /// says so here: the executor then issues each transfer by itself.
  virtual bool groupsTransfers() const { return false; }
  virtual void startGroup() {}
  /// Closes the group startGroup opened; its failure names the group.
  virtual Status endGroup() { return Status::ok(); }
  /// Whether the transport ends a wait that makes no progress itself
  /// (with a report of every rank's operation), so callers need not.
  virtual bool watchesProgress() const { return false; }
  /// Whether the transport takes a multi-step collective as one operation
  /// (postChain) at its place in the issue order, as NCCL's stream order
  /// has its steps: the NCCL emulation, whose requests complete only once
  /// the data has moved.
  virtual bool chainsSteps() const { return false; }
  /// One step: what starts its transfer, and host work once it is done.
  struct ChainStep {
    std::function<std::unique_ptr<Request>()> start;
    std::function<void()> after;
  };
  /// With chainsSteps: the steps in order, each started once the one
  /// before it (and its `after`) is done; the request completes with the
  /// last.
  virtual std::unique_ptr<Request> postChain(std::vector<ChainStep> steps) {
    return nullptr;
  }
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_BACKEND_H
