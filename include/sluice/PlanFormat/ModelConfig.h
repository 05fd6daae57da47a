//===- ModelConfig.h - The model a plan trains ------------------*- C++ -*-===//
//
// The model section of a plan file, as plain data. Header-only and free of
// MLIR: the runtime reads it from the plan, and the compiler fills it when
// it writes the plan.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_PLANFORMAT_MODELCONFIG_H
#define SLUICE_PLANFORMAT_MODELCONFIG_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace sluice::rt {

enum class LayerKind { Embedding, Transformer, Output };

/// A block's normalisation (transformer and output layers) and its
/// feed-forward kind: typed here, spelled in the plan as the dialect's
/// enums print ("layernorm", "rmsnorm"; "gelu", "swiglu", "geglu").
enum class NormType { LayerNorm, RmsNorm };
enum class MlpType { Gelu, SwiGlu, GeGlu };

inline const char *getName(NormType n) {
  return n == NormType::RmsNorm ? "rmsnorm" : "layernorm";
}
inline const char *getName(MlpType m) {
  return m == MlpType::SwiGlu  ? "swiglu"
         : m == MlpType::GeGlu ? "geglu"
                               : "gelu";
}
/// Sets `out` to the one of `values` that `nameOf` spells `name`; false
/// for another name.
template <typename Enum, typename NameOf>
bool parseByName(const std::string &name, std::initializer_list<Enum> values,
                 NameOf nameOf, Enum &out) {
  for (Enum value : values)
    if (name == nameOf(value)) {
      out = value;
      return true;
    }
  return false;
}
/// The kind `name` spells; false for another name.
inline bool parseNormType(const std::string &name, NormType &out) {
  return parseByName(
      name, {NormType::LayerNorm, NormType::RmsNorm},
      [](NormType n) { return getName(n); }, out);
}
inline bool parseMlpType(const std::string &name, MlpType &out) {
  return parseByName(
      name, {MlpType::Gelu, MlpType::SwiGlu, MlpType::GeGlu},
      [](MlpType m) { return getName(m); }, out);
}

/// Rotary position embeddings (Su et al., 2021, "RoFormer", section
/// 3.4.2; Hugging Face's Llama layout): in every head, dimensions i and i +
/// headDim / 2 turn by position * getFrequency(i). One definition for the
/// compiler's plan writer, both backends' kernels and the Hugging Face
/// mapping.
struct Rotary {
  /// The frequency base (rope_theta); 0: no rotary positions.
  double theta = 0;
  /// Llama 3.1's scaling of the frequencies for long contexts (transformers'
  /// rope_type "llama3"): wavelengths longer than originalPositions /
  /// lowFreqFactor are slowed by `factor`, those shorter than
  /// originalPositions / highFreqFactor kept, the ones between blended.
  /// factor 0: unscaled.
  double factor = 0;
  double lowFreqFactor = 1, highFreqFactor = 4;
  int64_t originalPositions = 0;
  /// Linear scaling instead (transformers' rope_type "linear", Gemma-3's
  /// global layers): every frequency divided by `factor`.
  bool linear = false;
  /// YaRN instead (Peng et al., 2023, "YaRN", section 3.2; transformers'
  /// rope_type "yarn", DeepSeek-V3's): each frequency blended between
  /// itself and itself / factor by how many turns it makes over
  /// originalPositions -- kept above betaFast turns, divided below
  /// betaSlow, a linear ramp in the pair index between -- and the rotation
  /// scaled by `magnitude` (transformers' attention_factor, which
  /// multiplies the cosines and sines).
  bool yarn = false;
  double betaFast = 32, betaSlow = 1, magnitude = 1;

  bool isScaled() const { return factor > 0; }
  /// The rope_type transformers names the scaling with.
  const char *getScalingName() const {
    return yarn ? "yarn" : linear ? "linear" : "llama3";
  }
  bool operator==(const Rotary &o) const {
    return theta == o.theta && factor == o.factor && linear == o.linear &&
           lowFreqFactor == o.lowFreqFactor &&
           highFreqFactor == o.highFreqFactor &&
           originalPositions == o.originalPositions && yarn == o.yarn &&
           betaFast == o.betaFast && betaSlow == o.betaSlow &&
           magnitude == o.magnitude;
  }
  bool operator!=(const Rotary &o) const { return !(*this == o); }

  /// The angle per position of dimension pair i of a `headDim` head, in
  /// double: positions reach 10^5 and every slice of a sequence must see
  /// the same rotation.
  double getFrequency(int64_t i, int64_t headDim) const {
    double inverse = std::pow(theta, -2.0 * double(i) / double(headDim));
    if (!isScaled())
      return inverse;
    if (linear)
      return inverse / factor;
    const double pi = 3.14159265358979323846;
    if (yarn) {
      // The pair index at which a frequency makes `turns` turns over the
      // original context (transformers' find_correction_dim), its floor
      // and ceiling bounding the ramp.
      double dim = double(headDim);
      auto pairAt = [&](double turns) {
        return dim * std::log(double(originalPositions) / (turns * 2.0 * pi)) /
               (2.0 * std::log(theta));
      };
      double low = std::max(std::floor(pairAt(betaFast)), 0.0);
      double high = std::min(std::ceil(pairAt(betaSlow)), dim - 1.0);
      if (low == high)
        high += 0.001;
      double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
      // ramp 0: the frequency kept (extrapolated); 1: divided.
      return (inverse / factor) * ramp + inverse * (1.0 - ramp);
    }
    double wavelength = 2.0 * pi / inverse;
    double low = double(originalPositions) / lowFreqFactor;
    double high = double(originalPositions) / highFreqFactor;
    if (wavelength < high)
      return inverse;
    if (wavelength > low)
      return inverse / factor;
    double smooth = (double(originalPositions) / wavelength - lowFreqFactor) /
                    (highFreqFactor - lowFreqFactor);
    return (1.0 - smooth) * inverse / factor + smooth * inverse;
  }

  /// Why the scaling cannot be computed, or "" (a factor of at least 1,
  /// high above low, a positive original context).
  std::string checkScaling() const {
    if (!isScaled())
      return "";
    if (!(factor >= 1) || !std::isfinite(factor))
      return "'factor' must be at least 1, got " + std::to_string(factor);
    if (linear)
      return "";
    if (yarn) {
      if (originalPositions < 1)
        return "'original_max_position_embeddings' must be positive, got " +
               std::to_string(originalPositions);
      if (!(betaSlow > 0) || !(betaFast > betaSlow) || !std::isfinite(betaFast))
        return "'beta_fast' must exceed 'beta_slow' > 0, got " +
               std::to_string(betaFast) + " and " + std::to_string(betaSlow);
      if (!(magnitude > 0) || !std::isfinite(magnitude))
        return "'attention_factor' must be positive, got " +
               std::to_string(magnitude);
      return "";
    }
    if (!(lowFreqFactor > 0) || !(highFreqFactor > lowFreqFactor) ||
        !std::isfinite(highFreqFactor))
      return "'high_freq_factor' must exceed 'low_freq_factor' > 0, got " +
             std::to_string(highFreqFactor) + " and " +
             std::to_string(lowFreqFactor);
    if (originalPositions < 1)
      return "'original_max_position_embeddings' must be positive, got " +
             std::to_string(originalPositions);
    return "";
  }
};

/// The keys the queries at positions [prefix, prefix + tokens) of one
/// sequence attend to, summed: position p sees p + 1 keys under the causal
/// mask, at most `window` of them with a sliding window (0: none). What
/// the cost model's and the progress line's attention FLOPs count.
inline double getKeysAttended(int64_t tokens, int64_t prefix, int64_t window) {
  auto sumUpTo = [](double n) { return n * (n + 1.0) / 2.0; };
  double first = double(prefix) + 1.0, last = first + double(tokens) - 1.0;
  if (window <= 0 || last <= double(window))
    return sumUpTo(last) - sumUpTo(first - 1.0);
  // Below the window each query sees its position's keys; from it on, w.
  double w = double(window);
  double below =
      sumUpTo(std::min(last, w)) - sumUpTo(std::min(first, w + 1.0) - 1.0);
  return below + (last - std::max(first, w + 1.0) + 1.0) * w;
}

/// Which layers a spec field belongs to (BlockFields.def's KINDS).
enum LayerKinds : unsigned { kEmbedding = 1, kTransformer = 2, kOutput = 4 };
inline unsigned getKindBit(LayerKind kind) {
  return kind == LayerKind::Embedding     ? kEmbedding
         : kind == LayerKind::Transformer ? kTransformer
                                          : kOutput;
}

using Names = std::vector<std::string>;

/// The C++ type of each of BlockFields.def's TYPEs.
namespace field {
/// A TYPE tag: its `type` is T.
template <typename T> struct Of { using type = T; };
struct Size : Of<int64_t> {};
struct Count : Of<int64_t> {};
struct Flag : Of<bool> {};
struct Real : Of<double> {};
struct Norm : Of<NormType> {};
struct Mlp : Of<MlpType> {};
struct Choice : Of<std::string> {};
struct Rotary : Of<rt::Rotary> {};
struct Names : Of<rt::Names> {};
} // namespace field

/// One layer's spec: its kind and the fields of BlockFields.def (the one
/// place a field is defined; docs/overview.md).
struct LayerConfig {
  LayerKind kind = LayerKind::Transformer;
#define SLUICE_BLOCK_FIELD(KINDS, TYPE, MEMBER, KEY, DEFAULT, PRESENCE, DOC)   \
  field::TYPE::type MEMBER = DEFAULT;
#include "sluice/PlanFormat/BlockFields.def"
  // Embedding and output under tensor parallelism: the table's rows split
  // over this many shards (getTensorShardModel sets it; not in plans: 1,
  // whole).
  int vocabShards = 1;

  bool hasQkvBias() const { return bias || qkvBias; }
  /// A value head's size (and an attention output head's): v_head_dim, or
  /// head_dim when it is not stated. Of a layer whose head_dim is set
  /// (plans, shard models).
  int64_t getValueDim() const { return vHeadDim > 0 ? vHeadDim : headDim; }
  bool isRms() const { return norm == NormType::RmsNorm; }
  /// A gated feed-forward block (SwiGLU, GeGLU): a third, gate matrix.
  bool isGated() const { return mlp != MlpType::Gelu; }
  /// Whether `name` is among `features`.
  bool hasFeature(const std::string &name) const {
    return std::find(features.begin(), features.end(), name) != features.end();
  }

  bool operator==(const LayerConfig &o) const {
    if (kind != o.kind || vocabShards != o.vocabShards)
      return false;
#define SLUICE_BLOCK_FIELD(KINDS, TYPE, MEMBER, KEY, DEFAULT, PRESENCE, DOC)   \
  if (!(MEMBER == o.MEMBER))                                                   \
    return false;
#include "sluice/PlanFormat/BlockFields.def"
    return true;
  }
  bool operator!=(const LayerConfig &o) const { return !(*this == o); }
};

struct ModelConfig {
  std::string name;
  int64_t seqLen = 0;
  int64_t microBatch = 1;
  int64_t hidden = 0;
  /// Embedding, transformer layers, output layer, in chain order.
  std::vector<LayerConfig> layers;
  /// Sequence parallelism (Korthikanti et al., Megatron-LM's
  /// `--sequence-parallel`): a shard model's activations outside the
  /// tensor-parallel regions -- the norms, the residual stream and the
  /// messages between stages -- split over this
  /// many shards by tokens (getTensorShardModel sets it; 1: whole). Shard
  /// i holds the i-th contiguous 1/sequenceShards of a slice's rows x
  /// tokens (for one row, the i-th part of the sequence).
  int sequenceShards = 1;
  /// The tensor-parallel shards a shard model is one of
  /// (getTensorShardModel sets it; 1: whole).
  int tensorShards = 1;
  /// Context parallelism: the ranks each sequence splits over (the plan's
  /// cp; 1: whole). A rank's key/value caches hold its seqLen /
  /// contextShards tokens of each row (walkKeyValues).
  int contextShards = 1;
  /// Expert parallelism: the members of the expert group a shard model's
  /// sparse layers split their experts over (each holds experts / this
  /// many; checkExpertParallel holds); 1: every replica holds them all.
  int expertShards = 1;
  /// The copies a member's experts compute on, as a multiple of the
  /// balanced share (tokens x top_k): at least 1; 0: the most any routing
  /// sends (dropless whatever the routing). A routing that sends a member
  /// more is refused.
  double expertCapacity = 0;
  /// The numerics every layer shares (the model op's `norm_eps`,
  /// `exact_gelu`): every norm's epsilon; GELU as x * Phi(x) instead of
  /// the tanh approximation.
  double normEps = 1e-5;
  bool exactGelu = false;
  /// The embedding layer's output times this (Gemma: sqrt(hidden)).
  double embeddingScale = 1.0;
  /// A token whose lookups give its table row no gradient (nn.Embedding's
  /// padding_idx); -1: none.
  int64_t paddingToken = -1;
  /// The context length the model was defined with (its source config's
  /// max_position_embeddings), which seqLen may be shorter than; 0:
  /// seqLen.
  int64_t maxPositions = 0;
  /// Attention scores times this instead of 1 / sqrt(head_dim) (Gemma-2's
  /// query_pre_attn_scalar^-0.5; 0: the default), and capped to
  /// cap * tanh(score / cap) (Gemma-2's attn_logit_softcapping; 0: none).
  double attentionScale = 0;
  double attentionSoftcap = 0;
  /// The logits capped alike (Gemma-2's final_logit_softcapping; 0: none).
  double finalSoftcap = 0;
  /// What the model imported from computes and these layers do not: the
  /// runtime refuses to train it.
  std::vector<std::string> unmodelled;
};

/// The load-balancing loss of a model's mixtures of experts (transformers'
/// load_balancing_loss_func, after Fedus et al., 2022, section 2.2): over
/// every sparse layer's tokens of one microbatch, aux_loss x experts x
/// sum_e f_e P_e, f_e the share of token copies routed to expert e and P_e
/// its mean router probability. `first` and `last` index model.layers (the
/// first and last sparse layer); `layers` counts the sparse layers.
struct BalanceLoss {
  double coefficient = 0;
  int64_t experts = 0, topK = 0, layers = 0;
  int first = -1, last = -1;
  bool isOn() const { return coefficient > 0; }
};

/// The model's load-balancing loss (off when no layer states aux_loss).
inline BalanceLoss getBalanceLoss(const ModelConfig &model) {
  BalanceLoss loss;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerConfig &l = model.layers[i];
    if (l.kind != LayerKind::Transformer || l.experts == 0)
      continue;
    loss.coefficient = std::max(loss.coefficient, l.auxLoss);
    loss.experts = l.experts;
    loss.topK = l.topK;
    ++loss.layers;
    if (loss.first < 0)
      loss.first = int(i);
    loss.last = int(i);
  }
  if (!loss.isOn())
    return BalanceLoss();
  return loss;
}

/// Why the model's sparse layers cannot share one load-balancing loss, or
/// "": with aux_loss on any, every sparse layer states the same aux_loss,
/// experts and top_k (the loss concatenates their router logits, as
/// transformers does).
inline std::string checkBalanceLoss(const ModelConfig &model) {
  const LayerConfig *first = nullptr;
  int transformer = 0;
  bool on = false;
  for (const LayerConfig &l : model.layers)
    on = on || l.auxLoss > 0;
  for (const LayerConfig &l : model.layers) {
    if (l.kind != LayerKind::Transformer)
      continue;
    int index = transformer++;
    if (!on || l.experts == 0)
      continue;
    if (!first) {
      first = &l;
      continue;
    }
    auto differs = [&](const char *key, std::string a, std::string b) {
      return "layer " + std::to_string(index) + ": '" + key + "' = " + b +
             " differs from the first sparse layer's " + a +
             ": the load-balancing loss ('aux_loss') takes every sparse "
             "layer's routing as one";
    };
    if (l.auxLoss != first->auxLoss)
      return differs("aux_loss", std::to_string(first->auxLoss),
                     std::to_string(l.auxLoss));
    if (l.experts != first->experts)
      return differs("experts", std::to_string(first->experts),
                     std::to_string(l.experts));
    if (l.topK != first->topK)
      return differs("top_k", std::to_string(first->topK),
                     std::to_string(l.topK));
  }
  return "";
}

/// Why ZeRO-3 cannot shard `model`'s weights, or "". A sigmoid router's
/// bias (DeepSeek-V3's auxiliary-loss-free balance) is read from the fp32
/// masters and moved by a rule outside Adam (ExpertBias.h); ZeRO-3 keeps
/// only a replica's part of the masters and gathers the working copy, so
/// it does not run such a layer yet.
inline std::string checkShardedWeights(const ModelConfig &model) {
  int transformer = 0;
  for (const LayerConfig &l : model.layers) {
    if (l.kind != LayerKind::Transformer)
      continue;
    int index = transformer++;
    if (l.experts > 0 && l.router == "sigmoid")
      return "layer " + std::to_string(index) +
             ": its sigmoid router's bias is read in fp32 and moved outside "
             "Adam (auxiliary-loss-free balance), which ZeRO-3 does not "
             "shard yet; use ZeRO stage 2";
  }
  return "";
}

/// Why the experts of `model`'s sparse layers cannot be split over `ep`
/// members of an expert group, or "": 1 always can; more need a sparse
/// layer, and every sparse layer's experts divide by ep (each member
/// holds the same number of whole experts, as Megatron-LM's
/// expert-model-parallel size requires).
inline std::string checkExpertParallel(const ModelConfig &model, int64_t ep) {
  if (ep < 1)
    return "the expert-parallel size must be positive, got " +
           std::to_string(ep);
  if (ep == 1)
    return "";
  int transformer = 0;
  bool sparse = false;
  for (const LayerConfig &l : model.layers) {
    if (l.kind != LayerKind::Transformer)
      continue;
    int index = transformer++;
    if (l.experts == 0)
      continue;
    sparse = true;
    if (l.experts % ep != 0)
      return "layer " + std::to_string(index) + ": its " +
             std::to_string(l.experts) +
             " experts ('experts') do not split over " + std::to_string(ep) +
             " expert-parallel members (ep must divide every sparse layer's "
             "expert count)";
  }
  if (!sparse)
    return "expert parallelism (ep = " + std::to_string(ep) +
           ") splits the experts of mixture-of-experts layers, and the "
           "model has none ('experts' on no layer)";
  return "";
}

/// Why `model`'s sequences, cut into slices of `slices` tokens, cannot be
/// split over `cp` context-parallel ranks, or "". Each slice is cut into
/// 2 cp equal chunks (rank i holds chunks i and 2 cp - 1 - i, Megatron-LM's
/// causal balance), so 2 cp divides every slice. Every layer kind runs
/// split: attention by ring attention, learned positions and rotary ones
/// at each chunk's places, the load-balancing statistics summed over the
/// ranks.
inline std::string checkContextParallel(const ModelConfig &model, int64_t cp,
                                        const std::vector<int64_t> &slices) {
  (void)model;
  if (cp < 1)
    return "the context-parallel size must be positive, got " +
           std::to_string(cp);
  if (cp == 1)
    return "";
  for (size_t i = 0; i < slices.size(); ++i)
    if (slices[i] % (2 * cp) != 0)
      return (slices.size() == 1 ? "the sequence's "
                                 : "slice " + std::to_string(i) + "'s ") +
             std::to_string(slices[i]) + " tokens do not cut into " +
             std::to_string(2 * cp) +
             " equal chunks (2 x cp: each context-parallel rank holds two, "
             "one from each end, for the causal balance)";
  return "";
}

/// Whether the vocabulary layer `l` splits its table by rows over `tp`
/// tensor-parallel shards: Megatron-LM's vocabulary-parallel embedding (a
/// masked lookup, then an all-reduce) and output layer (each shard's
/// logits, then the cross-entropy's all-reduces; Weitkamp,
/// 2024, "Input Embedding" and "Cross-Entropy"). A tied table splits
/// alike at both ends, so each shard's two halves are the same rows. A
/// Vocabulary Parallelism shard stays as it is: the pipeline's devices
/// split it already.
inline bool splitsVocabulary(const LayerConfig &l, int tp) {
  return tp >= 2 && !l.sharded &&
         (l.kind == LayerKind::Embedding || l.kind == LayerKind::Output);
}

/// Rows [first, first + count) of a `vocab`-row table that shard `index`
/// of `tp` holds: ceil(vocab / tp) each, the last fewer (the padding a
/// shard count that does not divide the vocabulary asks for).
inline std::pair<int64_t, int64_t> getShardVocabRows(int64_t vocab, int index,
                                                     int tp) {
  int64_t rows = (vocab + tp - 1) / tp;
  int64_t first = std::min<int64_t>(vocab, int64_t(index) * rows);
  return {first, std::min(rows, vocab - first)};
}

/// The logits' columns of one shard of `l`'s vocabulary: the largest
/// share (the first shard's), or the whole vocabulary when it does not
/// split.
inline int64_t getShardVocabColumns(const LayerConfig &l) {
  return getShardVocabRows(l.vocab, 0, l.vocabShards).second;
}

/// Why `model` cannot be split over `tp` tensor-parallel shards, or "" when
/// it can, as far as the core of its blocks goes (blocks::
/// checkTensorParallel adds each feature's rules): every transformer
/// layer's query heads and feed-forward width
/// divide by tp, and its key/value heads either divide by tp or divide tp
/// (then each shard holds the one key/value head its query heads share,
/// replicated: Weitkamp, 2024, "Grouped/Multi-Query
/// Attention").
/// The same for one transformer layer (no "layer N: " before the reason).
inline std::string checkLayerTensorParallel(const LayerConfig &l, int tp) {
  if (l.heads % tp != 0)
    return std::to_string(l.heads) + " attention heads do not divide among " +
           std::to_string(tp) + " tensor-parallel shards";
  if (l.ffn % tp != 0)
    return "the feed-forward width " + std::to_string(l.ffn) +
           " does not divide among " + std::to_string(tp) +
           " tensor-parallel shards";
  if (l.kvHeads % tp != 0 && tp % l.kvHeads != 0)
    return std::to_string(l.kvHeads) +
           " key/value heads neither divide among " + std::to_string(tp) +
           " tensor-parallel shards nor divide " + std::to_string(tp) +
           " (to be replicated)";
  return "";
}

inline std::string checkTensorParallel(const ModelConfig &model, int tp) {
  if (tp < 1)
    return "tensor parallelism must be at least 1, got " + std::to_string(tp);
  int transformer = 0;
  for (const LayerConfig &l : model.layers) {
    if (l.kind != LayerKind::Transformer)
      continue;
    if (std::string why = checkLayerTensorParallel(l, tp); !why.empty())
      return "layer " + std::to_string(transformer) + ": " + why;
    ++transformer;
  }
  for (const LayerConfig &l : model.layers)
    if (splitsVocabulary(l, tp) &&
        getShardVocabRows(l.vocab, tp - 1, tp).second < 1)
      return std::string(l.kind == LayerKind::Embedding
                             ? "the embedding's "
                             : "the output layer's ") +
             std::to_string(l.vocab) + "-row table leaves the last of " +
             std::to_string(tp) + " tensor-parallel shards no rows";
  return "";
}

/// The key/value heads each of `tp` shards holds: its share, or the one
/// head its query heads read when there are fewer heads than shards.
inline int64_t getShardKvHeads(const LayerConfig &l, int tp) {
  return l.kvHeads >= tp ? l.kvHeads / tp : 1;
}

/// The model one of `tp` tensor-parallel shards runs (Megatron-LM): each
/// transformer layer keeps heads/tp query heads, its key/value heads'
/// share (getShardKvHeads) and ffn/tp of the feed-forward width; the
/// vocabulary layers that split (splitsVocabulary) record the shard count
/// and keep their whole `vocab`: a shard holds getShardVocabRows of it, and
/// its buffers are sized for the largest share (getShardVocabColumns), so
/// every shard's layout is the same. The hidden size is whole. With
/// `sequenceParallel`, the activations between the tensor-parallel regions
/// split by tokens too (ModelConfig::sequenceShards = tp). Its sparse
/// layers' experts split over `expertShards` members of an expert group
/// (ModelConfig::expertShards; the layers keep their whole `experts`,
/// which the router scores), each member's experts computing on
/// `expertCapacity` times the balanced share of copies (0: the dropless
/// bound). checkTensorParallel must accept `model` and `tp`,
/// checkExpertParallel `expertShards`.
inline ModelConfig getTensorShardModel(ModelConfig model, int tp,
                                       bool sequenceParallel = false,
                                       int expertShards = 1,
                                       double expertCapacity = 0) {
  model.sequenceShards = sequenceParallel ? tp : 1;
  model.tensorShards = tp;
  model.expertShards = expertShards;
  model.expertCapacity = expertCapacity;
  for (LayerConfig &l : model.layers)
    if (splitsVocabulary(l, tp))
      l.vocabShards = tp;
    else if (l.kind == LayerKind::Transformer) {
      l.kvHeads = getShardKvHeads(l, tp);
      l.heads /= tp;
      l.ffn /= tp;
      l.sharedFfn /= tp; // a mixture of experts' shared expert
    }
  return model;
}

} // namespace sluice::rt

#endif // SLUICE_PLANFORMAT_MODELCONFIG_H
