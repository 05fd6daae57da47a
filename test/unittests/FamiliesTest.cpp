//===- FamiliesTest.cpp - The Hugging Face family adapters ----------------===//
//
// Each family is one folder (lib/Families/<family>/): its config keys read
// into the block spec, the config it writes back for a spec, its weight
// names. These tests hold every family to its own round trip -- a config
// imported, written back by the family that claims the spec, and imported
// again gives the same spec -- and check the registry and the names.
//
//===----------------------------------------------------------------------===//

#include "sluice/Families/Family.h"
#include "sluice/Import/HFConfig.h"
#include "sluice/SluiceOps.h"
#include "sluice/Target/Plan.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>

using namespace mlir;
using namespace mlir::sluice;
namespace families = ::sluice::families;
namespace rt = ::sluice::rt;

namespace {

class FamiliesTest : public ::testing::Test {
protected:
  FamiliesTest()
      : handler(&context, [this](Diagnostic &diag) {
          if (diag.getSeverity() == DiagnosticSeverity::Error)
            errors.push_back(diag.str());
          return success();
        }) {}

  /// The block spec `json` imports to; false (and errors) when refused.
  bool importSpec(const std::string &json, rt::ModelConfig &spec) {
    OwningOpRef<ModuleOp> module = importHFConfig(json, "config.json", &context);
    if (!module)
      return false;
    auto models = module->getOps<ModelOp>();
    if (models.empty())
      return false;
    spec = getModelConfig(*models.begin());
    return true;
  }

  std::string readExample(const std::string &path) {
    auto buffer =
        llvm::MemoryBuffer::getFile(std::string(SLUICE_SOURCE_DIR) + "/" + path);
    EXPECT_TRUE(bool(buffer)) << path;
    return buffer ? (*buffer)->getBuffer().str() : "";
  }

  MLIRContext context;
  ScopedDiagnosticHandler handler;
  std::vector<std::string> errors;
};

/// The first field in which two specs differ, or "".
std::string compareSpecs(const rt::ModelConfig &a, const rt::ModelConfig &b) {
  if (a.hidden != b.hidden || a.layers.size() != b.layers.size())
    return "hidden size or layer count";
  if (a.normEps != b.normEps || a.exactGelu != b.exactGelu)
    return "norm epsilon or GELU";
  if (a.embeddingScale != b.embeddingScale || a.paddingToken != b.paddingToken)
    return "embedding scale or padding token";
  if (a.attentionScale != b.attentionScale ||
      a.attentionSoftcap != b.attentionSoftcap ||
      a.finalSoftcap != b.finalSoftcap)
    return "attention scale or soft-caps";
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const rt::LayerConfig &x = a.layers[i], &y = b.layers[i];
    std::string at = "layer " + std::to_string(i) + ": ";
    if (x.kind != y.kind || x.vocab != y.vocab || x.positions != y.positions)
      return at + "kind, vocabulary or positions";
    if (x.heads != y.heads || x.kvHeads != y.kvHeads ||
        x.headDim != y.headDim || x.ffn != y.ffn)
      return at + "heads or widths";
    if (x.bias != y.bias || x.qkvBias != y.qkvBias)
      return at + "biases";
    if (x.qkNorm != y.qkNorm)
      return at + "query/key norms";
    if (x.rotary != y.rotary)
      return at + "rotary positions";
    if (x.postNorms != y.postNorms || x.window != y.window)
      return at + "sandwich norms or window";
    if (x.norm != y.norm || x.mlp != y.mlp || x.tied != y.tied)
      return at + "norm, MLP or tying";
    if (x != y)
      return at + "another field of the block spec";
  }
  return "";
}

constexpr const char *kSmall = R"("hidden_size": 64, "num_hidden_layers": 3,
  "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96,
  "vocab_size": 300, "max_position_embeddings": 32, "rms_norm_eps": 1e-5,
  "torch_dtype": "float32")";

/// One small config per model type, each with what its family adds.
std::vector<std::pair<std::string, std::string>> getSmallConfigs() {
  std::string small = kSmall;
  return {
      {"llama", "{\"model_type\": \"llama\", \"hidden_act\": \"silu\", " +
                    small +
                    ", \"rope_theta\": 500000.0, \"rope_scaling\": "
                    "{\"rope_type\": \"llama3\", \"factor\": 8.0, "
                    "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                    "\"original_max_position_embeddings\": 16}}"},
      {"mistral", "{\"model_type\": \"mistral\", \"hidden_act\": \"silu\", " +
                      small + ", \"sliding_window\": 8}"},
      {"qwen2", "{\"model_type\": \"qwen2\", \"hidden_act\": \"silu\", " +
                    small + ", \"tie_word_embeddings\": true}"},
      {"gemma", "{\"model_type\": \"gemma\", \"head_dim\": 24, " + small + "}"},
      {"qwen3", "{\"model_type\": \"qwen3\", \"hidden_act\": \"silu\", "
                "\"head_dim\": 32, \"rope_theta\": 1000000.0, " +
                    small + "}"},
      {"gemma2", "{\"model_type\": \"gemma2\", \"head_dim\": 16, " + small +
                     ", \"sliding_window\": 8, \"query_pre_attn_scalar\": "
                     "20, \"attn_logit_softcapping\": null}"},
      {"gpt2", R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 2,
        "n_head": 4, "n_positions": 32, "vocab_size": 300,
        "activation_function": "gelu", "torch_dtype": "float32"})"},
      {"mixtral", "{\"model_type\": \"mixtral\", \"hidden_act\": \"silu\", " +
                      small +
                      ", \"num_local_experts\": 8, \"num_experts_per_tok\": "
                      "2, \"sliding_window\": null, \"rope_theta\": 1e6}"},
      {"qwen3_moe",
       "{\"model_type\": \"qwen3_moe\", \"hidden_act\": \"silu\", "
       "\"head_dim\": 32, \"num_experts\": 8, \"num_experts_per_tok\": 2, "
       "\"moe_intermediate_size\": 48, \"norm_topk_prob\": true, "
       "\"mlp_only_layers\": [1], " +
           small + "}"},
      {"qwen2_moe",
       "{\"model_type\": \"qwen2_moe\", \"hidden_act\": \"silu\", "
       "\"num_experts\": 4, \"num_experts_per_tok\": 2, "
       "\"moe_intermediate_size\": 48, \"shared_expert_intermediate_size\": "
       "32, \"mlp_only_layers\": [0], \"output_router_logits\": true, "
       "\"router_aux_loss_coef\": 0.02, " +
           small + "}"},
      {"olmoe", "{\"model_type\": \"olmoe\", \"hidden_act\": \"silu\", "
                "\"num_experts\": 4, \"num_experts_per_tok\": 2, " +
                    small + "}"},
      {"olmo2", "{\"model_type\": \"olmo2\", \"hidden_act\": \"silu\", " +
                    small + ", \"rope_theta\": 500000.0}"},
      {"gemma3_text",
       "{\"model_type\": \"gemma3_text\", \"head_dim\": 16, " + small +
           ", \"sliding_window\": 8, \"sliding_window_pattern\": 3, "
           "\"rope_local_base_freq\": 100.0, \"rope_scaling\": "
           "{\"rope_type\": \"linear\", \"factor\": 8.0}}"},
  };
}

TEST(FamilyRegistry, EveryModelTypeHasOneFamily) {
  std::vector<std::string> seen;
  for (const families::Family *family : families::getFamilies())
    for (const std::string &type : family->getModelTypes()) {
      EXPECT_EQ(families::lookupFamily(type), family) << type;
      EXPECT_EQ(std::count(seen.begin(), seen.end(), type), 0) << type;
      seen.push_back(type);
    }
  EXPECT_EQ(families::lookupFamily("gpt_neox"), nullptr);
  EXPECT_EQ(families::getSupportedModelTypes(),
            "deepseek_v3, gemma, gemma2, gemma3_text, gpt2, llama, mistral, mixtral, olmo2, olmoe, qwen2, qwen2_moe, qwen3, qwen3_moe");
}

TEST_F(FamiliesTest, EachFamilyWritesBackWhatItReads) {
  auto configs = getSmallConfigs();
  for (const char *example :
       {"examples/llama-3-8b/config.json", "examples/llama-3.2-1b/config.json",
        "examples/gemma-2-9b/config.json", "examples/qwen3-0.6b/config.json",
        "examples/olmo-2-7b/config.json", "examples/gemma-3-1b/config.json",
        "examples/gemma-3-4b/config.json",
        "examples/mixtral-8x7b/config.json",
        "examples/qwen3-30b-a3b/config.json",
        "examples/olmoe-1b-7b/config.json"})
    configs.push_back({"", readExample(example)});
  for (const auto &[type, text] : configs) {
    SCOPED_TRACE(type.empty() ? text.substr(0, 60) : type);
    rt::ModelConfig first, second;
    ASSERT_TRUE(importSpec(text, first))
        << (errors.empty() ? "" : errors.front());
    // A run at half the context still writes the source's.
    nlohmann::json source = nlohmann::json::parse(text);
    int64_t context = source.contains("n_positions")
                          ? source["n_positions"].get<int64_t>()
                          : source["max_position_embeddings"].get<int64_t>();
    EXPECT_EQ(first.maxPositions, context);
    first.seqLen /= 2;
    const families::Family *family = nullptr;
    nlohmann::json written;
    std::string why;
    ASSERT_TRUE(families::describeModel(first, family, written, why)) << why;
    EXPECT_EQ(written.value("max_position_embeddings",
                            written.value("n_positions", int64_t(0))),
              context);
    first.seqLen *= 2;
    std::string original = source.value("model_type", "");
    EXPECT_EQ(written.value("model_type", ""), original);
    EXPECT_EQ(family, families::lookupFamily(original));
    ASSERT_TRUE(importSpec(written.dump(), second))
        << (errors.empty() ? "" : errors.front()) << "\n" << written.dump(2);
    EXPECT_EQ(compareSpecs(first, second), "") << written.dump(2);
  }
}

TEST_F(FamiliesTest, SpecsNoFamilyWritesAreRefusedByName) {
  auto configs = getSmallConfigs();
  rt::ModelConfig mistral, qwen2;
  ASSERT_TRUE(importSpec(configs[1].second, mistral));
  ASSERT_TRUE(importSpec(configs[2].second, qwen2));
  const families::Family *family = nullptr;
  nlohmann::json written;
  std::string why;
  // A window on the middle layer only: neither Mistral's nor Gemma-2's.
  mistral.layers[1].window = 0;
  mistral.name = "odd";
  EXPECT_FALSE(families::describeModel(mistral, family, written, why));
  EXPECT_NE(why.find("model 'odd' has attention windows"), std::string::npos)
      << why;
  // Qwen2's config cannot say a head width other than hidden / heads.
  for (rt::LayerConfig &l : qwen2.layers)
    if (l.kind == rt::LayerKind::Transformer)
      l.headDim = 32;
  EXPECT_FALSE(families::describeModel(qwen2, family, written, why));
  EXPECT_NE(why.find("which Qwen2's config cannot say"), std::string::npos)
      << why;
  // Query/key norms are Qwen3's, which has no query, key and value
  // biases, and Gemma-3's, which has sandwich norms: a spec with a field
  // no family's config says together with its others is refused by those
  // fields, each claiming family's lack named (lib/Families/Describe.cpp).
  rt::ModelConfig qwen3, gemma;
  ASSERT_TRUE(importSpec(configs[4].second, qwen3));
  ASSERT_TRUE(importSpec(configs[3].second, gemma));
  for (rt::LayerConfig &l : qwen3.layers)
    l.qkvBias = l.kind == rt::LayerKind::Transformer;
  qwen3.name = "both";
  EXPECT_FALSE(families::describeModel(qwen3, family, written, why));
  EXPECT_NE(why.find("model 'both' states 'qk_norm = heads', 'qkv_bias', "
                     "'rope_theta', which no Hugging Face family's config "
                     "says together (llama's cannot say 'qk_norm = heads', "
                     "'qkv_bias'; "),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("qwen2's cannot say 'qk_norm = heads'"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("qwen3's cannot say 'qkv_bias'"), std::string::npos)
      << why;
  for (rt::LayerConfig &l : gemma.layers)
    l.qkNorm = l.kind == rt::LayerKind::Transformer ? "heads"
                                                     : "none";
  EXPECT_FALSE(families::describeModel(gemma, family, written, why));
  EXPECT_NE(why.find("states 'qk_norm = heads', 'rope_theta', which no "
                     "Hugging Face family's config says together (gemma's "
                     "cannot say 'qk_norm = heads'; gemma3's needs "
                     "'post_norms')"),
            std::string::npos)
      << why;
  // A block of no family at all.
  for (rt::LayerConfig &l : qwen2.layers)
    l.mlp = rt::MlpType::Gelu;
  EXPECT_FALSE(families::describeModel(qwen2, family, written, why));
  EXPECT_NE(why.find("is not the block of any Hugging Face family"),
            std::string::npos)
      << why;
}

TEST_F(FamiliesTest, WeightNamesFollowEachFamilysLayout) {
  auto getLlama = [&](const auto &configs) {
    rt::ModelConfig llama;
    EXPECT_TRUE(importSpec(configs[0].second, llama));
    return llama;
  };
  auto configs = getSmallConfigs();
  rt::ModelConfig gemma2, gpt2;
  ASSERT_TRUE(importSpec(configs[5].second, gemma2));
  ASSERT_TRUE(importSpec(configs[6].second, gpt2));
  families::Source src;
  std::string why;
  const families::WeightNames &g2 =
      families::lookupFamily("gemma2")->getWeightNames("gemma2");
  ASSERT_TRUE(families::getSource(g2, g2.prefix, gemma2, "layers.1.norm2.weight",
                                  src, why))
      << why;
  ASSERT_EQ(src.pieces.size(), 1u);
  EXPECT_EQ(src.pieces[0].tensor,
            "model.layers.1.pre_feedforward_layernorm.weight");
  EXPECT_EQ(src.offset, 1.0f) << "Gemma stores w of the gain 1 + w";
  ASSERT_TRUE(families::getSource(g2, g2.prefix, gemma2,
                                  "layers.0.attn.qkv.weight", src, why));
  ASSERT_EQ(src.pieces.size(), 3u);
  EXPECT_EQ(src.pieces[1].tensor, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_TRUE(src.pieces[1].transposed) << "nn.Linear stores [out, in]";
  EXPECT_EQ(src.pieces[1].column, 4 * 16);
  EXPECT_EQ(src.offset, 0.0f);

  const families::WeightNames &g = families::lookupFamily("gpt2")->getWeightNames("gpt2");
  ASSERT_TRUE(
      families::getSource(g, "", gpt2, "layers.1.attn.qkv.bias", src, why));
  ASSERT_EQ(src.pieces.size(), 1u) << "GPT-2's c_attn is fused";
  EXPECT_EQ(src.pieces[0].tensor, "h.1.attn.c_attn.bias");
  EXPECT_EQ(src.columns, 3 * 64);
  ASSERT_TRUE(
      families::getSource(g, "", gpt2, "layers.0.mlp.up.weight", src, why));
  EXPECT_FALSE(src.pieces[0].transposed) << "Conv1D stores [in, out]";
  EXPECT_FALSE(
      families::getSource(g, "", gpt2, "layers.0.mlp.gate.weight", src, why));
  EXPECT_EQ(why, "parameter layers.0.mlp.gate.weight has no Hugging Face "
                 "counterpart");

  // Qwen3's query/key norms: one gain of head_dim each; no counterpart in
  // Llama's layout, and a Llama checkpoint is refused such a plan.
  rt::ModelConfig qwen3;
  ASSERT_TRUE(importSpec(configs[4].second, qwen3));
  const families::Family *q3 = families::lookupFamily("qwen3");
  const families::WeightNames &q = q3->getWeightNames("qwen3");
  ASSERT_TRUE(families::getSource(q, q.prefix, qwen3,
                                  "layers.2.attn.k_norm.weight", src, why))
      << why;
  ASSERT_EQ(src.pieces.size(), 1u);
  EXPECT_EQ(src.pieces[0].tensor, "model.layers.2.self_attn.k_norm.weight");
  EXPECT_EQ(src.columns, 32) << "head_dim, not hidden";
  EXPECT_EQ(q3->checkWeights(qwen3, "qwen3"), "");
  const families::Family *llama = families::lookupFamily("llama");
  const families::WeightNames &l = llama->getWeightNames("llama");
  EXPECT_FALSE(families::getSource(l, l.prefix, qwen3,
                                   "layers.0.attn.q_norm.weight", src, why));
  EXPECT_EQ(llama->checkWeights(qwen3, "llama"),
            "a llama model, which has no 'qk_norm = heads', but the plan's "
            "model has it");
  EXPECT_EQ(q3->checkWeights(getLlama(configs), "qwen3"),
            "a qwen3 model, whose layers have 'qk_norm = heads', but the "
            "plan's model's do not");
}

} // namespace
