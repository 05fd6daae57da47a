//===- HFConfigTest.cpp - Hugging Face config.json import -----------------===//

#include "sluice/Import/HFConfig.h"
#include "sluice/Analysis/LayerCost.h"
#include "sluice/SluiceOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::sluice;
namespace rt = ::sluice::rt;

namespace {

/// Imports configs and keeps every diagnostic for inspection.
class HFConfigTest : public ::testing::Test {
protected:
  HFConfigTest()
      : handler(&context, [this](Diagnostic &diag) {
          (diag.getSeverity() == DiagnosticSeverity::Error     ? errors
           : diag.getSeverity() == DiagnosticSeverity::Warning ? warnings
                                                               : remarks)
              .push_back(diag.str());
          return success();
        }) {}

  ModelOp import(llvm::StringRef json, llvm::StringRef name = "config.json") {
    module = importHFConfig(json, name, &context);
    if (!module)
      return nullptr;
    auto models = module->getOps<ModelOp>();
    return models.empty() ? ModelOp() : *models.begin();
  }

  ModelOp importExample(llvm::StringRef relativePath) {
    std::string path =
        std::string(SLUICE_SOURCE_DIR) + "/" + relativePath.str();
    auto buffer = llvm::MemoryBuffer::getFile(path);
    EXPECT_TRUE(bool(buffer)) << "cannot read " << path;
    if (!buffer)
      return nullptr;
    return import((*buffer)->getBuffer(), path);
  }

  /// The single error the last import reported ("" if none or several).
  std::string onlyError() const {
    return errors.size() == 1 ? errors.front() : "";
  }

  static llvm::SmallVector<TransformerLayerOp> layers(ModelOp model) {
    return llvm::to_vector(model.getBody().getOps<TransformerLayerOp>());
  }

  MLIRContext context;
  ScopedDiagnosticHandler handler;
  OwningOpRef<ModuleOp> module;
  std::vector<std::string> errors, warnings, remarks;
};

constexpr const char *kTinyLlama = R"({
  "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2,
  "intermediate_size": 128, "vocab_size": 300,
  "max_position_embeddings": 32, "hidden_act": "silu", "rope_theta": 250.5,
  "rms_norm_eps": 1e-5, "tie_word_embeddings": false, "torch_dtype": "float32"
})";

/// kTinyLlama with `key`'s value replaced by `value` (the raw JSON text),
/// or the key removed when `value` is empty.
std::string tinyLlamaWith(llvm::StringRef key, llvm::StringRef value) {
  std::string json = kTinyLlama;
  std::string quoted = "\"" + key.str() + "\": ";
  size_t start = json.find(quoted);
  EXPECT_NE(start, std::string::npos) << key.str();
  size_t end = json.find_first_of(",}", start + quoted.size());
  if (value.empty()) {
    if (json[end] == ',')
      ++end;
    json.erase(start, end - start);
  } else {
    json.replace(start + quoted.size(), end - start - quoted.size(),
                 value.str());
  }
  return json;
}

TEST_F(HFConfigTest, Llama3_8B) {
  ModelOp model = importExample("examples/llama-3-8b/config.json");
  ASSERT_TRUE(model) << (errors.empty() ? "" : errors.front());
  EXPECT_TRUE(remarks.empty()) << "the example config is complete";
  auto transformer = layers(model);
  ASSERT_EQ(transformer.size(), 32u);
  for (TransformerLayerOp layer : transformer) {
    EXPECT_EQ(layer.getSpec().heads, 32);
    EXPECT_EQ(layer.getSpec().kvHeads, 8);
    EXPECT_EQ(layer.getHeadDimOrDefault(), 128);
    EXPECT_EQ(layer.getSpec().ffn, 14336);
    EXPECT_EQ(layer.getSpec().norm, rt::NormType::RmsNorm);
    EXPECT_EQ(layer.getSpec().mlp, rt::MlpType::SwiGlu);
    EXPECT_FALSE(layer.getSpec().bias);
  }
  EXPECT_EQ(model.getEmbedding().getVocab(), 128256);
  EXPECT_FALSE(model.getEmbedding().getPositions()) << "rotary, no table";
  EXPECT_EQ(model.getOutputLayer().getVocab(), 128256);
  EXPECT_FALSE(model.getOutputLayer().getTied());
  EXPECT_EQ(model.getSeqLen(), 8192) << "max_position_embeddings";
  EXPECT_EQ(model.getMicroBatch(), 1);
  EXPECT_TRUE(model.getDtype().isBF16());
  EXPECT_EQ(model.getHidden(), 4096);
  // Meta's published parameter count of Llama-3-8B.
  EXPECT_EQ(getModelParameterCount(model), 8030261248);
}

TEST_F(HFConfigTest, Gemma2_9B) {
  ModelOp model = importExample("examples/gemma-2-9b/config.json");
  ASSERT_TRUE(model) << (errors.empty() ? "" : errors.front());
  auto transformer = layers(model);
  ASSERT_EQ(transformer.size(), 42u);
  EXPECT_EQ(transformer.front().getSpec().headDim, 256);
  EXPECT_EQ(transformer.front().getSpec().kvHeads, 8);
  EXPECT_EQ(transformer.front().getSpec().mlp, rt::MlpType::GeGlu);
  EXPECT_EQ(model.getHidden(), 3584);
  EXPECT_EQ(model.getEmbedding().getVocab(), 256000);
  // Gemma-2 configs omit tie_word_embeddings; the default is reported.
  EXPECT_TRUE(model.getOutputLayer().getTied());
  ASSERT_EQ(remarks.size(), 1u);
  EXPECT_NE(remarks.front().find("'tie_word_embeddings' is absent; using true"),
            std::string::npos)
      << remarks.front();
  // What it computes beyond the layers is recorded and said, once each.
  EXPECT_EQ(model.getNormEps(), 1e-6);
  EXPECT_FALSE(model.getExactGelu()) << "gelu_pytorch_tanh";
  // Gemma-2's window is its even layers' (transformers'
  // Gemma2Attention); the odd ones attend globally.
  EXPECT_EQ(transformer[0].getSpec().window, 4096);
  EXPECT_EQ(transformer[1].getSpec().window, 0);
  EXPECT_EQ(transformer[40].getSpec().window, 4096);
  // Gemma's embedding scale and padding token, Gemma-2's attention scale,
  // both caps and its sandwich norms: all of it is modelled.
  EXPECT_DOUBLE_EQ(*model.getEmbeddingScale(), std::sqrt(3584.0));
  EXPECT_EQ(model.getPaddingToken(), 0u);
  EXPECT_DOUBLE_EQ(*model.getAttentionScale(), 1.0 / 16.0);
  EXPECT_DOUBLE_EQ(*model.getAttentionSoftcap(), 50.0);
  EXPECT_DOUBLE_EQ(*model.getFinalSoftcap(), 30.0);
  EXPECT_TRUE(transformer.front().getSpec().postNorms);
  EXPECT_FALSE(model.getUnmodelled());
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

TEST_F(HFConfigTest, GPT2SpellingAndDefaults) {
  // GPT-2 small as published: n_* keys, null n_inner, no tie key.
  ModelOp model = import(R"({
    "activation_function": "gelu_new", "model_type": "gpt2",
    "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": null,
    "n_layer": 12, "n_positions": 1024, "vocab_size": 50257
  })",
                         "gpt2/config.json");
  ASSERT_TRUE(model) << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(model.getSymName(), "gpt2");
  auto transformer = layers(model);
  ASSERT_EQ(transformer.size(), 12u);
  EXPECT_EQ(transformer.front().getSpec().ffn, 4 * 768);
  EXPECT_TRUE(transformer.front().getSpec().bias);
  EXPECT_EQ(transformer.front().getSpec().norm, rt::NormType::LayerNorm);
  EXPECT_EQ(transformer.front().getSpec().mlp, rt::MlpType::Gelu);
  EXPECT_EQ(model.getEmbedding().getPositions(), 1024);
  EXPECT_TRUE(model.getOutputLayer().getTied());
  // Hugging Face's count for GPT-2 small (tied LM head counted once).
  EXPECT_EQ(getModelParameterCount(model), 124439808);
  // n_inner, tie_word_embeddings, torch_dtype and layer_norm_epsilon
  // defaults are all reported.
  EXPECT_EQ(remarks.size(), 4u);
  EXPECT_EQ(model.getNormEpsOrDefault(), 1e-5);
  EXPECT_FALSE(model.getExactGelu()) << "gelu_new is the tanh form";
  EXPECT_TRUE(warnings.empty());
}

TEST_F(HFConfigTest, AbsentActivationAndDTypeTakeTransformersDefaults) {
  // LlamaConfig (and Mistral's, Qwen2's, Qwen3's, OLMo-2's) default
  // hidden_act to "silu"; a config naming no torch_dtype loads in
  // float32. Each default applied is said.
  ModelOp model = import(tinyLlamaWith("hidden_act", ""));
  ASSERT_TRUE(model) << (errors.empty() ? "" : errors.front());
  ASSERT_EQ(remarks.size(), 1u);
  EXPECT_NE(remarks.front().find("'hidden_act' is absent; using \"silu\""),
            std::string::npos)
      << remarks.front();
  remarks.clear();
  std::string noDType = kTinyLlama;
  noDType.erase(noDType.find(", \"torch_dtype\""),
                std::string(", \"torch_dtype\": \"float32\"").size());
  model = import(noDType);
  ASSERT_TRUE(model) << (errors.empty() ? "" : errors.front());
  EXPECT_TRUE(model.getDtype().isF32());
  ASSERT_EQ(remarks.size(), 1u);
  EXPECT_NE(remarks.front().find("'torch_dtype' is absent; using \"float32\""),
            std::string::npos)
      << remarks.front();
}

TEST_F(HFConfigTest, NumericsAreRead) {
  ModelOp model = import(tinyLlamaWith("rms_norm_eps", "3e-6"));
  ASSERT_TRUE(model);
  EXPECT_EQ(model.getNormEps(), 3e-6);
  EXPECT_FALSE(model.getUnmodelled());
  // LlamaConfig's own default, said.
  model = import(tinyLlamaWith("rms_norm_eps", ""));
  ASSERT_TRUE(model);
  EXPECT_EQ(model.getNormEps(), 1e-6);
  // transformers' "gelu" is the exact form.
  model = import(R"({"model_type": "gpt2", "n_embd": 64, "n_head": 4,
    "n_layer": 1, "n_positions": 32, "vocab_size": 100,
    "activation_function": "gelu", "layer_norm_epsilon": 1e-5})");
  ASSERT_TRUE(model);
  EXPECT_TRUE(model.getExactGelu());
}

TEST_F(HFConfigTest, RopeParametersOfTransformers5) {
  std::string json = tinyLlamaWith("rope_theta", "");
  json.insert(json.find('{') + 1, R"("rope_parameters": {"rope_theta": )"
                                  R"(500000.0, "rope_type": "default"},)");
  ModelOp model = import(json);
  ASSERT_TRUE(model);
  EXPECT_EQ(layers(model).front().getSpec().rotary.theta,
            500000.0);
  EXPECT_TRUE(warnings.empty());
  // Llama 3.1's scaling is computed: the layers carry it.
  json = tinyLlamaWith("rope_theta", "");
  json.insert(json.find('{') + 1,
              R"("rope_parameters": {"rope_theta": 500000.0, )"
              R"("rope_type": "llama3", "factor": 8.0, "low_freq_factor": )"
              R"(1.0, "high_freq_factor": 4.0, )"
              R"("original_max_position_embeddings": 8192},)");
  model = import(json);
  ASSERT_TRUE(model);
  EXPECT_TRUE(warnings.empty());
  const ::sluice::rt::Rotary &scaling = layers(model).front().getSpec().rotary;
  ASSERT_TRUE(scaling.isScaled());
  EXPECT_EQ(scaling.factor, 8.0);
  EXPECT_EQ(scaling.originalPositions, 8192);
  EXPECT_FALSE(model.getUnmodelled());
  // Another kind is not: warned about, and refused by the runtime.
  json = tinyLlamaWith("rope_theta", "");
  json.insert(json.find('{') + 1, R"("rope_parameters": {"rope_theta": )"
                                  R"(500000.0, "rope_type": "dynamic"},)");
  model = import(json);
  ASSERT_TRUE(model);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings.front().find("not modelled (the costs hold; sluice-run "
                                  "refuses to train this model): "
                                  "rope_parameters: "),
            std::string::npos)
      << warnings.front();
  EXPECT_TRUE(model.getUnmodelled());
}

// Qwen2: Llama's keys, biases on the query, key and value projections
// whatever attention_bias says, Qwen2Config's own key/value head default,
// and its sliding window (off by default) not modelled when on.
TEST_F(HFConfigTest, Qwen2HasQueryKeyValueBiasesOnly) {
  std::string json = tinyLlamaWith("num_key_value_heads", "");
  json.replace(json.find("\"llama\""), 7, "\"qwen2\"");
  json.replace(json.find("\"num_attention_heads\": 4"), 24,
               "\"num_attention_heads\": 32");
  ModelOp model = import(json);
  ASSERT_TRUE(model) << (errors.empty() ? "" : errors.front());
  for (TransformerLayerOp layer : layers(model)) {
    EXPECT_TRUE(layer.getSpec().qkvBias);
    EXPECT_FALSE(layer.getSpec().bias);
    EXPECT_EQ(layer.getSpec().kvHeads, 32) << "Qwen2Config's";
  }
  EXPECT_FALSE(model.getUnmodelled());
  json.insert(json.find('{') + 1, R"("use_sliding_window": true,)");
  model = import(json);
  ASSERT_TRUE(model);
  EXPECT_TRUE(model.getUnmodelled());
}

// Qwen3: Llama's keys, query/key norms always, no biases, Qwen3Config's
// head_dim default (128, whatever hidden / heads is); attention_bias (on all
// four attention maps) and its sliding window not modelled when on.
TEST_F(HFConfigTest, Qwen3NormalisesQueryAndKeyHeads) {
  std::string json = kTinyLlama;
  json.replace(json.find("\"llama\""), 7, "\"qwen3\"");
  ModelOp model = import(json);
  ASSERT_TRUE(model) << (errors.empty() ? "" : errors.front());
  for (TransformerLayerOp layer : layers(model)) {
    EXPECT_EQ(layer.getSpec().qkNorm, "heads");
    EXPECT_FALSE(layer.getSpec().qkvBias);
    EXPECT_FALSE(layer.getSpec().bias);
    EXPECT_EQ(layer.getHeadDimOrDefault(), 128) << "Qwen3Config's";
  }
  EXPECT_FALSE(model.getUnmodelled());
  for (const char *key : {"attention_bias", "use_sliding_window"}) {
    std::string on = json;
    on.insert(on.find('{') + 1, "\"" + std::string(key) + "\": true,");
    model = import(on);
    ASSERT_TRUE(model);
    EXPECT_TRUE(model.getUnmodelled()) << key;
  }
}

TEST_F(HFConfigTest, KeyValueHeadDefaultsPerConfigClass) {
  std::string json = tinyLlamaWith("num_key_value_heads", "");
  json.replace(json.find("\"llama\""), 7, "\"mistral\"");
  json.replace(json.find("\"num_attention_heads\": 4"), 24,
               "\"num_attention_heads\": 16");
  ModelOp model = import(json);
  ASSERT_TRUE(model) << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(layers(model).front().getSpec().kvHeads, 8) << "MistralConfig's";
}

TEST_F(HFConfigTest, TinyLlamaImportsExactly) {
  ModelOp model = import(kTinyLlama, "tiny/config.json");
  ASSERT_TRUE(model);
  EXPECT_EQ(model.getSymName(), "tiny");
  EXPECT_EQ(layers(model).size(), 2u);
  EXPECT_TRUE(model.getDtype().isF32());
  EXPECT_EQ(model.getActivationType(),
            RankedTensorType::get({1, 32, 64}, model.getDtype()));
  for (TransformerLayerOp layer : layers(model))
    EXPECT_EQ(layer.getSpec().rotary.theta, 250.5);
  EXPECT_TRUE(remarks.empty());
}

TEST_F(HFConfigTest, AbsentRopeThetaDefaultsWithRemark) {
  ModelOp model = import(tinyLlamaWith("rope_theta", ""));
  ASSERT_TRUE(model);
  EXPECT_EQ(layers(model).front().getSpec().rotary.theta,
            10000.0);
  ASSERT_EQ(remarks.size(), 1u);
  EXPECT_NE(remarks.front().find("rope_theta"), std::string::npos);
}

TEST_F(HFConfigTest, AbsentKvHeadsDefaultsToHeadsWithRemark) {
  ModelOp model = import(tinyLlamaWith("num_key_value_heads", ""));
  ASSERT_TRUE(model);
  EXPECT_EQ(layers(model).front().getSpec().kvHeads, 4);
  ASSERT_EQ(remarks.size(), 1u) << remarks.back();
  EXPECT_NE(remarks.front().find("num_key_value_heads"), std::string::npos);
}

struct BadConfig {
  const char *key;
  const char *value; // "" removes the key
  const char *error;
};

void PrintTo(const BadConfig &bad, std::ostream *os) {
  *os << bad.key << " = " << (*bad.value ? bad.value : "(absent)");
}

class HFConfigErrorTest : public HFConfigTest,
                          public ::testing::WithParamInterface<BadConfig> {};

TEST_P(HFConfigErrorTest, NamesTheKey) {
  const BadConfig &bad = GetParam();
  EXPECT_FALSE(import(tinyLlamaWith(bad.key, bad.value)));
  EXPECT_EQ(onlyError(), bad.error);
}

INSTANTIATE_TEST_SUITE_P(
    Keys, HFConfigErrorTest,
    ::testing::Values(
        BadConfig{"hidden_size", "", "missing required key 'hidden_size'"},
        BadConfig{"num_hidden_layers", "",
                  "missing required key 'num_hidden_layers'"},
        BadConfig{"num_attention_heads", "",
                  "missing required key 'num_attention_heads'"},
        BadConfig{"intermediate_size", "",
                  "missing required key 'intermediate_size'"},
        BadConfig{"vocab_size", "", "missing required key 'vocab_size'"},
        BadConfig{"max_position_embeddings", "",
                  "missing required key 'max_position_embeddings'"},
        BadConfig{"model_type", "",
                  "missing required key 'model_type' (supported: deepseek_v3, gemma, "
                  "gemma2, gemma3_text, gpt2, llama, mistral, mixtral, olmo2, olmoe, "
                  "qwen2, qwen2_moe, qwen3, qwen3_moe)"},
        BadConfig{"hidden_size", "-64",
                  "key 'hidden_size' must be a positive integer, got -64"},
        BadConfig{"vocab_size", "0",
                  "key 'vocab_size' must be a positive integer, got 0"},
        BadConfig{"num_hidden_layers", "\"two\"",
                  "key 'num_hidden_layers' must be a positive integer, got "
                  "\"two\""},
        BadConfig{"intermediate_size", "12.5",
                  "key 'intermediate_size' must be a positive integer, got "
                  "12.5"},
        BadConfig{"num_attention_heads", "5",
                  "key 'hidden_size' = 64 is not divisible by key "
                  "'num_attention_heads' = 5"},
        BadConfig{"num_key_value_heads", "3",
                  "key 'num_attention_heads' = 4 is not divisible by key "
                  "'num_key_value_heads' = 3"},
        BadConfig{"rope_theta", "-1",
                  "key 'rope_theta' must be a positive number, got -1"},
        BadConfig{"rope_theta", "\"big\"",
                  "key 'rope_theta' must be a positive number, got \"big\""},
        BadConfig{"model_type", "\"bert\"",
                  "key 'model_type' = \"bert\" is not supported (supported: "
                  "deepseek_v3, gemma, gemma2, gemma3_text, gpt2, llama, mistral, mixtral, olmo2, olmoe, qwen2, qwen2_moe, qwen3, qwen3_moe)"},
        BadConfig{"hidden_act", "\"relu\"",
                  "key 'hidden_act' = \"relu\" is not supported for "
                  "model_type \"llama\" (supported: silu, swish)"},
        BadConfig{"tie_word_embeddings", "\"no\"",
                  "key 'tie_word_embeddings' must be true or false, got "
                  "\"no\""},
        BadConfig{"torch_dtype", "\"int8\"",
                  "key 'torch_dtype' = \"int8\" is not supported (supported: "
                  "bfloat16, float16, float32)"}));

TEST_F(HFConfigTest, MixtureOfExpertsIsRefused) {
  std::string json = kTinyLlama;
  json.insert(1, "\"num_local_experts\": 8,");
  EXPECT_FALSE(import(json));
  EXPECT_EQ(onlyError(), "key 'num_local_experts' = 8: model_type \"llama\" "
                         "has no mixture of experts (the families with one: "
                         "mixtral, olmoe, qwen2_moe, qwen3_moe)");
}

TEST_F(HFConfigTest, MixtralIsAMixtureOfExperts) {
  std::string json = kTinyLlama;
  json.replace(json.find("\"llama\""), 7, "\"mixtral\"");
  json.insert(1, "\"num_local_experts\": 8, \"num_experts_per_tok\": 2,");
  ModelOp model = import(json);
  ASSERT_TRUE(model) << (errors.empty() ? "" : errors.front());
  for (TransformerLayerOp op : layers(model)) {
    auto layer = op.getSpec();
    EXPECT_EQ(layer.experts, 8);
    EXPECT_EQ(layer.topK, 2);
    EXPECT_TRUE(layer.normTopK); // Mixtral always renormalises
    EXPECT_EQ(layer.ffn, 128);
  }
}

TEST_F(HFConfigTest, RouterLogitsTurnTheLoadBalancingLossOn) {
  std::string base = kTinyLlama;
  base.replace(base.find("\"llama\""), 7, "\"mixtral\"");
  base.insert(1, "\"num_local_experts\": 8, \"num_experts_per_tok\": 2,");
  // Off unless output_router_logits says so, whatever the coefficient.
  std::string off = base;
  off.insert(1, "\"router_aux_loss_coef\": 0.02,");
  ModelOp model = import(off);
  ASSERT_TRUE(model);
  for (TransformerLayerOp op : layers(model))
    EXPECT_EQ(op.getSpec().auxLoss, 0.0);
  // On: the coefficient on every sparse layer.
  std::string on = off;
  on.insert(1, "\"output_router_logits\": true,");
  model = import(on);
  ASSERT_TRUE(model) << (errors.empty() ? "" : errors.front());
  for (TransformerLayerOp op : layers(model))
    EXPECT_EQ(op.getSpec().auxLoss, 0.02);
  // On without a coefficient: Mixtral's default.
  std::string fallback = base;
  fallback.insert(1, "\"output_router_logits\": true,");
  model = import(fallback);
  ASSERT_TRUE(model);
  for (TransformerLayerOp op : layers(model))
    EXPECT_EQ(op.getSpec().auxLoss, 0.001);
  // A coefficient that is no non-negative number.
  std::string bad = base;
  bad.insert(1, "\"output_router_logits\": true, \"router_aux_loss_coef\": -1,");
  EXPECT_FALSE(import(bad));
  EXPECT_EQ(onlyError(), "key 'router_aux_loss_coef' = -1 must be a "
                         "non-negative number");
}

TEST_F(HFConfigTest, MoreExpertsPerTokenThanExpertsIsRefused) {
  std::string json = kTinyLlama;
  json.replace(json.find("\"llama\""), 7, "\"mixtral\"");
  json.insert(1, "\"num_local_experts\": 4, \"num_experts_per_tok\": 6,");
  EXPECT_FALSE(import(json));
  EXPECT_EQ(onlyError(), "key 'num_experts_per_tok' = 6 routes each token to "
                         "more experts than the 4 of 'num_local_experts'");
}

TEST_F(HFConfigTest, DisagreeingGPT2Spellings) {
  EXPECT_FALSE(import(R"({"model_type": "gpt2", "n_embd": 768,
    "hidden_size": 1024, "n_layer": 2, "n_head": 12, "n_positions": 64,
    "vocab_size": 100})"));
  EXPECT_EQ(onlyError(),
            "keys 'hidden_size' = 1024 and 'n_embd' = 768 disagree");
}

TEST_F(HFConfigTest, InvalidJSONReportsPosition) {
  EXPECT_FALSE(import("{\n  \"hidden_size\": 64,\n  oops\n}"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors.front().rfind("invalid JSON: ", 0), 0u) << errors.front();
}

TEST_F(HFConfigTest, NonObjectIsRefused) {
  EXPECT_FALSE(import("[1, 2]"));
  EXPECT_EQ(onlyError(), "config must be a JSON object, got [1,2]");
}

TEST_F(HFConfigTest, ErrorLocationPointsAtTheKey) {
  Location where = UnknownLoc::get(&context);
  ScopedDiagnosticHandler locate(&context, [&](Diagnostic &diag) {
    where = diag.getLocation();
    return success();
  });
  EXPECT_FALSE(import(
      "{\n  \"model_type\": \"llama\",\n  \"hidden_size\": 0\n}", "x.json"));
  auto loc = dyn_cast<FileLineColLoc>(where);
  ASSERT_TRUE(loc);
  EXPECT_EQ(loc.getFilename(), "x.json");
  EXPECT_EQ(loc.getLine(), 3u);
  EXPECT_EQ(loc.getColumn(), 3u);
}

} // namespace
