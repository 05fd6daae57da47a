//===- Olmo2.cpp - OLMo-2 (OLMo Team, 2024) -------------------------------===//
//
// transformers' Olmo2ForCausalLM: Llama's projections, SwiGLU and rotary
// positions in a block normalised after each half instead of before
// (x + norm(attn(x)), then x + norm(mlp(x)): `pre_norms = false`,
// `post_norms`), and the whole query and key projections RMS-normalised
// before the rotation, a gain per column (`qk_norm = projection`). Its
// checkpoints name the two norms post_attention_layernorm and
// post_feedforward_layernorm. `attention_bias` puts biases on the four
// attention maps, which the block spec does not model (OLMo-2's released
// configs leave it false).
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

namespace sluice::families {
namespace {

class Olmo2 final : public LlamaLayoutFamily {
public:
  Olmo2()
      : LlamaLayoutFamily(
            "olmo2", "Olmo2ForCausalLM",
            {{"pre_norms", "post_norms", "qk_norm = projection", "rope_theta",
              "rope_scaling"},
             {"pre_norms", "post_norms", "qk_norm = projection"}}) {
    traits.epsDefault = 1e-5;
    traits.epsDefaultText = "1e-05";
    traits.paddingDefault = 1;
  }

  bool readKeys(ConfigKeys &config, const std::string &,
                ConfigValues &values) const override {
    values.block.preNorms = false;
    values.block.postNorms = true;
    values.block.qkNorm = "projection";
    return readUnmodelledSwitch(config, "attention_bias", kAttentionBiases);
  }

  Claim claim(const ModelConfig &model, const LayerConfig &t,
              std::string &) const override {
    Shape shape = getShape(model, t);
    return shape.llama && shape.sameRotary && !t.preNorms ? Claim::Yes
                                                          : Claim::No;
  }

  void describeKeys(const ModelConfig &model, const LayerConfig &t,
                    nlohmann::json &c) const override {
    c["attention_bias"] = false;
  }

  const WeightNames &getWeightNames(const std::string &) const override {
    static const WeightNames names = [] {
      WeightNames n = getLlamaWeightNames();
      n.modules.erase("norm1");
      n.modules.erase("norm2");
      addPostNormNames(n);
      addQkNormNames(n);
      return n;
    }();
    return names;
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(olmo2, Olmo2)

} // namespace sluice::families
