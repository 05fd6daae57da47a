//===- Mixtral.cpp - Mixtral (Jiang et al., 2024) -------------------------===//
//
// transformers' MixtralForCausalLM: Mistral's attention (a sliding window
// only when `sliding_window` says one; MixtralConfig's default is none)
// with every feed-forward block a sparse mixture of `num_local_experts`
// SwiGLU experts of `intermediate_size`, each token routed to
// `num_experts_per_tok` of them by a softmax router whose top-k weights
// are always renormalised (MixtralSparseMoeBlock divides them by their
// sum): the block's `moe` feature with norm_top_k.
//
// Its tensors: the router `block_sparse_moe.gate`, expert e's gate, down
// and up maps `block_sparse_moe.experts.e.w1`, `w2` and `w3`.
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

namespace sluice::families {

namespace {

const ExpertKeys kExperts{"num_local_experts", 8, 2, "intermediate_size",
                          /*normKey=*/false,
                          /*auxDefault=*/0.001};

class Mixtral final : public LlamaLayoutFamily {
public:
  Mixtral()
      : LlamaLayoutFamily("mixtral", "MixtralForCausalLM",
                          {{"rope_theta", "window", "experts", "top_k",
                            "norm_top_k", "aux_loss"},
                           {"experts", "top_k", "norm_top_k"}}) {
    // MixtralConfig's defaults: Mistral's 8 key/value heads.
    traits.kvHeadsDefault = 8;
    traits.ropeThetaDefault = 1e6;
    traits.epsDefault = 1e-5;
    traits.epsDefaultText = "1e-05";
    traits.experts = true;
  }

  bool readKeys(ConfigKeys &config, const std::string &modelType,
                ConfigValues &values) const override {
    int64_t window = 0, width = 0;
    if (!readSlidingWindow(config, modelType, 0, window) ||
        !readExperts(config, modelType, kExperts, values, width))
      return false;
    values.block.window = window;
    values.block.normTopK = true;
    return true;
  }

  Claim claim(const ModelConfig &model, const LayerConfig &t,
              std::string &why) const override {
    Shape shape = getShape(model, t);
    if (!shape.llama || !shape.sameRotary || t.experts == 0 || t.qkvBias)
      return Claim::No;
    if (shape.window > 0 && !shape.everyLayer) {
      why = "has attention windows on some layers only, which Mixtral's "
            "config cannot say";
      return Claim::Refused;
    }
    return t.normTopK && hasUniformExperts(model, t) ? Claim::Yes
                                                      : Claim::No;
  }

  const WeightNames &getWeightNames(const std::string &) const override {
    static const WeightNames names = [] {
      WeightNames n = getLlamaWeightNames();
      addExpertNames(n, "block_sparse_moe.gate", "block_sparse_moe.experts.{}.",
                     {"w1", "w3", "w2"});
      return n;
    }();
    return names;
  }

  void describeKeys(const ModelConfig &model, const LayerConfig &t,
                    nlohmann::json &c) const override {
    c["sliding_window"] = t.window > 0 ? nlohmann::json(t.window)
                                       : nlohmann::json(nullptr);
    describeExperts(kExperts, t, c);
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(mixtral, Mixtral)

} // namespace sluice::families
