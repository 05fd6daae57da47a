//===- HfTokenizer.cpp - A dataset's tokenizer in a Hugging Face dir ------===//

#include "HfTokenizer.h"

#include "Checkpoint.h"

#include "sluice/PlanFormat/Json.h"
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace sluice::rt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Status readJson(const std::string &path, json &out) {
  std::string text;
  if (Status st = readFile(path, text); !st)
    return st;
  out = parseJson(text, /*allowExceptions=*/false);
  if (out.is_discarded())
    return Status::error("'" + path + "' is not valid JSON");
  return Status::ok();
}

Status copyInto(const fs::path &from, const std::string &dir,
                const std::string &name) {
  std::ifstream in(from, std::ios::binary);
  if (!in)
    return Status::error("cannot read the tokenizer file '" + from.string() +
                         "' the dataset names (moved since sluice-tokenize "
                         "ran?)");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return writeFileAtomically(dir + "/" + name, bytes.str());
}

/// The token strings of a tokenizer.json's or a vocab.json's ids.
std::string findToken(const json &vocab, int64_t id) {
  for (auto it = vocab.begin(); it != vocab.end(); ++it)
    if (it.value().is_number_integer() && it.value().get<int64_t>() == id)
      return it.key();
  return "";
}

/// tokenizer_config.json for each kind of file transformers reads.
Status describeTokenizer(const fs::path &file, const TokenizerFiles &t,
                         json &config, std::vector<std::string> &copies) {
  std::string name = file.filename().string();
  if (file.extension() == ".model") {
    // SentencePiece: Llama's tokenizer class reads it (the fast one is
    // converted from it, which needs protobuf); its default special
    // tokens are spm_train's.
    copies = {"tokenizer.model"};
    config = {{"tokenizer_class", "LlamaTokenizer"},
              {"bos_token", "<s>"},
              {"eos_token", "</s>"},
              {"unk_token", "<unk>"},
              {"add_bos_token", t.bos >= 0},
              {"add_eos_token", false},
              {"legacy", true}};
    return Status::ok();
  }
  if (name == "vocab.json") {
    json vocab;
    if (Status st = readJson(file.string(), vocab); !st)
      return st;
    copies = {"vocab.json", "merges.txt"};
    // A null where the tokenizer has none: GPT2Tokenizer would otherwise
    // default every special token to <|endoftext|>.
    config = {{"tokenizer_class", "GPT2Tokenizer"},
              {"bos_token", t.bos >= 0 ? json(findToken(vocab, t.bos))
                                       : json(nullptr)},
              {"eos_token", t.eos >= 0 ? json(findToken(vocab, t.eos))
                                       : json(nullptr)}};
    return Status::ok();
  }
  // A tokenizer.json: the fast tokenizer reads it as it is; its special
  // tokens are among its added tokens.
  json whole;
  if (Status st = readJson(file.string(), whole); !st)
    return st;
  copies = {"tokenizer.json"};
  // What a causal LM's forward takes (PreTrainedTokenizerFast would also
  // return token_type_ids, which generate() refuses), as Llama 3's
  // tokenizer_config.json says it.
  config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
            {"model_input_names", {"input_ids", "attention_mask"}}};
  json added = json::object();
  for (const json &token : whole.value("added_tokens", json::array()))
    if (token.contains("id") && token.contains("content"))
      added[token["content"].get<std::string>()] = token["id"];
  for (auto [key, id] : {std::pair{"bos_token", t.bos},
                         std::pair{"eos_token", t.eos}})
    if (id >= 0) {
      std::string text = findToken(added, id);
      if (text.empty() && whole.contains("model") &&
          whole["model"].contains("vocab") && whole["model"]["vocab"].is_object())
        text = findToken(whole["model"]["vocab"], id);
      if (!text.empty())
        config[key] = text;
    }
  return Status::ok();
}

} // namespace

Status exportTokenizer(const std::string &dir, const TokenizerFiles &t,
                       std::string &description) {
  fs::path file = t.file;
  json config;
  std::vector<std::string> copies;
  if (Status st = describeTokenizer(file, t, config, copies); !st)
    return st;
  for (const std::string &name : copies) {
    fs::path from = name == copies.front() ? file : file.parent_path() / name;
    if (Status st = copyInto(from, dir, name); !st)
      return st;
  }
  if (Status st = writeFileAtomically(dir + "/tokenizer_config.json",
                                      config.dump(2) + "\n");
      !st)
    return st;
  // The tokenizer's ids, where the config says none; a null where the
  // tokenizer has none (a config without the key takes the family's
  // default, Llama's 1 and 2, which would be another token here).
  json model;
  if (Status st = readJson(dir + "/config.json", model); !st)
    return st;
  for (auto [key, id] : {std::pair{"bos_token_id", t.bos},
                         std::pair{"eos_token_id", t.eos}})
    if (!model.contains(key) || model[key].is_null())
      model[key] = id >= 0 ? json(id) : json(nullptr);
  if (Status st = writeFileAtomically(dir + "/config.json",
                                      model.dump(2) + "\n");
      !st)
    return st;
  description = "with the tokenizer of --data (" + file.filename().string() +
                ", " + config["tokenizer_class"].get<std::string>() + ")";
  return Status::ok();
}

} // namespace sluice::rt
