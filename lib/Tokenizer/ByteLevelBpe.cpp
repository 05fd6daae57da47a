//===- ByteLevelBpe.cpp - GPT-2's byte-level BPE --------------------------===//
//
// Radford et al.'s GPT-2 tokenizer as Hugging Face's `tokenizers` runs it:
// added tokens are cut out of the text first; the rest is split by a regex
// (GPT-2's, or the Split pre-tokenizer's of a tokenizer.json such as Llama
// 3's); each piece's bytes map one to one onto printable code points
// (bytes_to_unicode); then the merges apply, lowest rank first, and each
// resulting symbol is looked up in the vocabulary.
//
//===----------------------------------------------------------------------===//

#include "Tokenizers.h"
#include "sluice/PlanFormat/Json.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <fstream>
#include <iterator>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace sluice::tok {

namespace {

/// GPT-2's pre-tokenization pattern (the `tokenizers` ByteLevel default).
const char *const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// Appends code point `c` as UTF-8.
void appendUtf8(std::string &out, uint32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

/// bytes_to_unicode: the printable bytes stand for themselves, the others
/// for 256, 257, ... in order; each as its UTF-8 string.
const std::vector<std::string> &getByteSymbols() {
  static const std::vector<std::string> symbols = [] {
    std::vector<std::string> s(256);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      appendUtf8(s[b], printable ? uint32_t(b) : uint32_t(next++));
    }
    return s;
  }();
  return symbols;
}

bool readJson(const std::string &path, nlohmann::json &out,
              std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read '" + path + "'";
    return false;
  }
  try {
    std::string text((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    out = sluice::parseJson(text);
  } catch (const nlohmann::json::exception &e) {
    error = "'" + path + "' is not JSON: " + e.what();
    return false;
  }
  return true;
}

class ByteLevelBpe final : public Tokenizer {
public:
  ~ByteLevelBpe() override {
    if (matchData)
      pcre2_match_data_free(matchData);
    if (regex)
      pcre2_code_free(regex);
  }

  /// A tokenizer.json whose model is BPE over ByteLevel pre-tokenization.
  bool loadTokenizerJson(const std::string &path, std::string &error);

  /// GPT-2's original files: vocab.json and merges.txt.
  bool loadVocabAndMerges(const std::string &vocabPath,
                          const std::string &mergesPath, std::string &error);

  bool encode(std::string_view text, std::vector<uint32_t> &ids,
              std::string &error) const override;

  bool decode(const std::vector<uint32_t> &ids, std::string &text,
              std::string &error) const override;

  int64_t getVocabSize() const override {
    uint32_t most = 0;
    for (const auto &[token, id] : vocab)
      most = std::max(most, id);
    return vocab.empty() ? 0 : int64_t(most) + 1;
  }
  std::optional<uint32_t> getBeginOfText() const override {
    return beginOfText;
  }
  std::optional<uint32_t> getEndOfText() const override { return endOfText; }
  std::string describe() const override {
    return "byte-level BPE '" + name + "'";
  }
  std::vector<std::string> getWarnings() const override { return warnings; }

private:
  struct AddedToken {
    std::string content;
    uint32_t id = 0;
    bool lstrip = false, rstrip = false;
  };

  /// One segment between added tokens: ByteLevel's add_prefix_space puts a
  /// space before each that does not start with one.
  bool encodeSegment(std::string_view segment, std::vector<uint32_t> &ids,
                     std::string &error) const {
    if (segment.empty())
      return true;
    if (addPrefixSpace && segment.front() != ' ')
      return encodeSplit(" " + std::string(segment), ids, error);
    return encodeSplit(segment, ids, error);
  }

  /// A token id as a file gives it: a whole number a token dataset holds
  /// (below 2^31), not truncated to 32 bits.
  static bool readId(const nlohmann::json &value, const std::string &token,
                     uint32_t &out, std::string &error) {
    if (!value.is_number_integer() ||
        (value.is_number_unsigned() ? value.get<uint64_t>() > 0x7fffffffull
                                    : (value.get<int64_t>() < 0 ||
                                       value.get<int64_t>() > 0x7fffffff))) {
      error = "token '" + token + "' has id " + value.dump() +
              ", not a whole number from 0 to 2147483647";
      return false;
    }
    out = uint32_t(value.get<uint64_t>());
    return true;
  }

  /// The UTF-8 length of the Unicode white-space character at `at` (Rust's
  /// char::is_whitespace, which the tokenizers library strips by), or 0.
  static size_t whitespaceAt(std::string_view text, size_t at);
  /// The same for the character ending at `end`, not before `floor`.
  static size_t whitespaceEndingAt(std::string_view text, size_t end,
                                   size_t floor) {
    for (size_t n = 1; n <= 3 && n <= end - floor; ++n)
      if (whitespaceAt(text, end - n) == n)
        return n;
    return 0;
  }

  std::optional<uint32_t> lookup(const std::string &token) const {
    auto it = vocab.find(token);
    if (it == vocab.end())
      return std::nullopt;
    return it->second;
  }

  /// Takes the merges, lowest rank first; "" when each merge's two parts
  /// and their join are tokens of the vocabulary, as Hugging Face's
  /// tokenizers requires (its BPE builder refuses the file otherwise:
  /// MergeTokenOutOfVocabulary), else why not.
  std::string setMerges(const std::vector<std::pair<std::string, std::string>> &m) {
    for (size_t rank = 0; rank < m.size(); ++rank) {
      const auto &[a, b] = m[rank];
      for (const std::string &token : {a, b, a + b})
        if (!vocab.count(token))
          return "merge " + std::to_string(rank) + " ('" + a + " " + b +
                 "') names '" + token +
                 "', which is not in the vocabulary";
      ranks.emplace(a + '\0' + b, int(rank));
    }
    return "";
  }

  bool compile(const std::string &pattern, std::string &error);

  /// Says why a tokenizer.json is not read; returns false.
  using Refuse = std::function<bool(const std::string &)>;
  bool readModel(const nlohmann::json &model, const std::string &path,
                 std::string &error, const Refuse &refuse);
  bool readPreTokenizer(const nlohmann::json &pre, std::string &pattern,
                        const Refuse &refuse);
  bool readAddedTokens(const nlohmann::json &j, const std::string &path,
                       std::string &error, const Refuse &refuse);

  /// The regex's pieces of `text` and what lies between them, each
  /// through BPE, as Hugging Face's Split (Isolated) cuts them: an empty
  /// match cuts there too, and takes no character. Without a regex
  /// (ByteLevel's use_regex false) the text is one piece.
  bool encodeSplit(std::string_view text, std::vector<uint32_t> &ids,
                   std::string &error) const;

  /// One piece: its bytes as symbols, merged lowest rank first.
  bool encodeWord(std::string_view piece, std::vector<uint32_t> &ids,
                  std::string &error) const;

  std::string name;
  std::unordered_map<std::string, uint32_t> vocab;
  /// decode's inverses, built on its first call.
  mutable std::vector<std::string> tokens;
  mutable std::vector<bool> isAdded;
  mutable std::unordered_map<std::string, char> byteOf;
  /// "left\0right" -> merge rank.
  std::unordered_map<std::string, int> ranks;
  /// Added tokens, longest first.
  std::vector<AddedToken> added;
  std::optional<uint32_t> unknown, beginOfText, endOfText;
  std::vector<std::string> warnings;
  bool addPrefixSpace = false, ignoreMerges = false;
  pcre2_code *regex = nullptr;
  /// The match data and the cache are the encoder's scratch.
  pcre2_match_data *matchData = nullptr;
  mutable std::mutex mutex;
  mutable std::unordered_map<std::string, std::vector<uint32_t>> cache;
};

bool ByteLevelBpe::loadTokenizerJson(const std::string &path,
                                     std::string &error) {
  name = path;
  nlohmann::json j;
  if (!readJson(path, j, error))
    return false;
  try {
    const nlohmann::json &model = j.at("model");
    Refuse refuse = [&](const std::string &what) {
      error = "'" + path + "': " + what +
              " is not supported (byte-level BPE tokenizers only: GPT-2's, "
              "Llama 3's)";
      return false;
    };
    if (model.value("type", "") != "BPE")
      return refuse("model type '" + model.value("type", "") + "'");
    if (j.contains("normalizer") && !j.at("normalizer").is_null())
      return refuse("a normalizer");
    for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (model.contains(key) && !model.at(key).is_null() &&
          !model.at(key).get<std::string>().empty())
        return refuse(std::string("the model's ") + key);
    if (model.value("byte_fallback", false))
      return refuse("byte_fallback");
    std::string pattern;
    if (!readModel(model, path, error, refuse) ||
        !readPreTokenizer(j.at("pre_tokenizer"), pattern, refuse) ||
        !readAddedTokens(j, path, error, refuse))
      return false;
    return compile(pattern, error);
  } catch (const nlohmann::json::exception &e) {
    error = "'" + path + "': " + e.what();
    return false;
  }
}

/// The BPE model's vocabulary, merges and unknown token.
bool ByteLevelBpe::readModel(const nlohmann::json &model,
                             const std::string &path, std::string &error,
                             const Refuse &refuse) {
  ignoreMerges = model.value("ignore_merges", false);
  for (auto &[token, id] : model.at("vocab").items())
    if (!readId(id, token, vocab[token], error)) {
      error = "'" + path + "': " + error;
      return false;
    }
  std::vector<std::pair<std::string, std::string>> merges;
  for (const nlohmann::json &m : model.at("merges")) {
    if (m.is_array()) {
      merges.push_back({m.at(0).get<std::string>(),
                        m.at(1).get<std::string>()});
      continue;
    }
    std::string line = m.get<std::string>();
    size_t space = line.find(' ', 1);
    if (space == std::string::npos)
      return refuse("merge '" + line + "'");
    merges.push_back({line.substr(0, space), line.substr(space + 1)});
  }
  if (std::string why = setMerges(merges); !why.empty()) {
    error = "'" + path + "': " + why;
    return false;
  }
  if (model.contains("unk_token") && model.at("unk_token").is_string())
    unknown = lookup(model.at("unk_token").get<std::string>());
  return true;
}

/// The pre-tokenizer: its splitting regex into `pattern`.
bool ByteLevelBpe::readPreTokenizer(const nlohmann::json &pre,
                                    std::string &pattern,
                                    const Refuse &refuse) {
  // The pre-tokenizer: ByteLevel alone (GPT-2's regex, unless
  // use_regex is false), or a Split by a regex then ByteLevel.
  std::vector<nlohmann::json> steps;
  if (pre.value("type", "") == "Sequence")
    for (const nlohmann::json &p : pre.at("pretokenizers"))
      steps.push_back(p);
  else
    steps.push_back(pre);
  bool byteLevel = false;
  for (const nlohmann::json &p : steps) {
    std::string type = p.value("type", "");
    if (type == "ByteLevel") {
      byteLevel = true;
      addPrefixSpace = p.value("add_prefix_space", false);
      if (p.value("use_regex", true)) {
        if (!pattern.empty())
          return refuse("two splitting regexes");
        pattern = kGpt2Pattern;
      }
    } else if (type == "Split" && !byteLevel &&
               p.value("behavior", "") == "Isolated" &&
               !p.value("invert", false) &&
               p.at("pattern").contains("Regex")) {
      if (!pattern.empty())
        return refuse("two splitting regexes");
      pattern = p.at("pattern").at("Regex").get<std::string>();
    } else {
      return refuse("pre-tokenizer '" + type + "'");
    }
  }
  if (!byteLevel)
    return refuse("a pre-tokenizer without ByteLevel");
  return true;
}

/// The added tokens, with the ids the tokenizers library gives them.
bool ByteLevelBpe::readAddedTokens(const nlohmann::json &j,
                                   const std::string &path, std::string &error,
                                   const Refuse &refuse) {
  // The tokenizers library does not take an added token's id from
  // the file: one the model's vocabulary holds keeps its id there,
  // the others are numbered on from the vocabulary's size (or from
  // the last one so numbered) in the file's order, and a different
  // stated id is only logged. Real files state those same ids; for
  // one that does not, the library's ids are the ones a model trained
  // with Hugging Face saw, so they are the ones used here, with a
  // warning.
  const size_t modelSize = vocab.size();
  std::optional<uint32_t> lastNew;
  for (const nlohmann::json &t : j.value("added_tokens",
                                         nlohmann::json::array())) {
    AddedToken a;
    a.content = t.at("content").get<std::string>();
    uint32_t stated = 0;
    if (!readId(t.at("id"), a.content, stated, error)) {
      error = "'" + path + "': added " + error;
      return false;
    }
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    if (t.value("single_word", false))
      return refuse("the added token '" + a.content + "' with single_word");
    if (auto known = lookup(a.content)) {
      a.id = *known;
    } else {
      a.id = lastNew && *lastNew >= modelSize ? *lastNew + 1
                                              : uint32_t(modelSize);
      lastNew = a.id;
      vocab[a.content] = a.id;
    }
    if (a.id != stated)
      warnings.push_back("'" + path + "': the added token '" +
                         a.content + "' states id " +
                         std::to_string(stated) +
                         "; the Hugging Face tokenizers library gives it " +
                         std::to_string(a.id) + ", which is used");
    added.push_back(std::move(a));
  }
  std::sort(added.begin(), added.end(),
            [](const AddedToken &a, const AddedToken &b) {
              return a.content.size() > b.content.size();
            });
  for (const char *marker : {"<|endoftext|>", "<|end_of_text|>"})
    if (auto id = lookup(marker); id && !endOfText)
      endOfText = id;
  if (auto id = lookup("<|begin_of_text|>"))
    beginOfText = id;
  return true;
}

bool ByteLevelBpe::loadVocabAndMerges(const std::string &vocabPath,
                        const std::string &mergesPath, std::string &error) {
  name = vocabPath;
  nlohmann::json j;
  if (!readJson(vocabPath, j, error))
    return false;
  try {
    for (auto &[token, id] : j.items())
      if (!readId(id, token, vocab[token], error)) {
        error = "'" + vocabPath + "': " + error;
        return false;
      }
  } catch (const nlohmann::json::exception &e) {
    error = "'" + vocabPath + "': " + e.what();
    return false;
  }
  std::ifstream in(mergesPath);
  if (!in) {
    error = "cannot read '" + mergesPath + "' (merges.txt beside " +
            "vocab.json)";
    return false;
  }
  std::vector<std::pair<std::string, std::string>> merges;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0)
      continue;
    size_t space = line.find(' ', 1);
    if (space == std::string::npos) {
      error = "'" + mergesPath + "' line " + std::to_string(number) +
              ": not two symbols";
      return false;
    }
    merges.push_back({line.substr(0, space), line.substr(space + 1)});
  }
  if (std::string why = setMerges(merges); !why.empty()) {
    error = "'" + mergesPath + "': " + why;
    return false;
  }
  if (auto id = lookup("<|endoftext|>")) {
    endOfText = id;
    added.push_back({"<|endoftext|>", *id});
  }
  return compile(kGpt2Pattern, error);
}

bool ByteLevelBpe::encode(std::string_view text, std::vector<uint32_t> &ids,
            std::string &error) const {
  // Added tokens first (the longest at each place; lstrip and rstrip
  // take the white space beside them), then each segment between them,
  // as Hugging Face's added vocabulary splits a text before its
  // pre-tokenizer sees the segments.
  size_t start = 0;
  for (size_t at = 0; at < text.size();) {
    const AddedToken *hit = nullptr;
    for (const AddedToken &a : added)
      if (!a.content.empty() &&
          text.compare(at, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    if (!hit) {
      ++at;
      continue;
    }
    size_t end = at;
    if (hit->lstrip)
      while (size_t n = whitespaceEndingAt(text, end, start))
        end -= n;
    if (!encodeSegment(text.substr(start, end - start), ids, error))
      return false;
    ids.push_back(hit->id);
    at += hit->content.size();
    if (hit->rstrip)
      while (size_t n = whitespaceAt(text, at))
        at += n;
    start = at;
  }
  return encodeSegment(text.substr(start), ids, error);
}

bool ByteLevelBpe::decode(const std::vector<uint32_t> &ids, std::string &text,
            std::string &error) const {
  // Each token's symbols back to the bytes bytes_to_unicode gave them;
  // an added token is its text (the tokenizers library's ByteLevel
  // decoder, special tokens kept).
  if (tokens.empty()) {
    tokens.resize(size_t(getVocabSize()));
    for (const auto &[token, id] : vocab)
      tokens[id] = token;
    isAdded.assign(tokens.size(), false);
    for (const AddedToken &a : added)
      if (a.id < isAdded.size())
        isAdded[a.id] = true;
    const std::vector<std::string> &symbols = getByteSymbols();
    for (int b = 0; b < 256; ++b)
      byteOf[symbols[b]] = char(b);
  }
  for (uint32_t id : ids) {
    if (id >= tokens.size() || tokens[id].empty()) {
      error = "id " + std::to_string(id) + " is not in the vocabulary of " +
              describe();
      return false;
    }
    const std::string &token = tokens[id];
    if (isAdded[id]) {
      text += token;
      continue;
    }
    for (size_t at = 0; at < token.size();) {
      // One UTF-8 character: its length from the lead byte.
      unsigned char lead = uint8_t(token[at]);
      size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
      auto it = byteOf.find(token.substr(at, n));
      if (it == byteOf.end()) {
        error = "token " + std::to_string(id) + " of " + describe() +
                " is not byte-level";
        return false;
      }
      text += it->second;
      at += n;
    }
  }
  return true;
}

size_t ByteLevelBpe::whitespaceAt(std::string_view text, size_t at) {
  if (at >= text.size())
    return 0;
  uint8_t c = uint8_t(text[at]);
  if (c == ' ' || (c >= '\t' && c <= '\r'))
    return 1;
  auto cont = [&](size_t k) {
    return at + k < text.size() ? uint8_t(text[at + k]) : 0;
  };
  uint32_t cp = 0;
  size_t n = 0;
  if (c >= 0xC2 && c < 0xE0)
    cp = (c & 0x1Fu) << 6 | (cont(1) & 0x3Fu), n = 2;
  else if (c >= 0xE0 && c < 0xF0)
    cp = (c & 0x0Fu) << 12 | (cont(1) & 0x3Fu) << 6 | (cont(2) & 0x3Fu),
    n = 3;
  else
    return 0;
  bool space = cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
               (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
               cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
               cp == 0x3000;
  return space ? n : 0;
}

bool ByteLevelBpe::compile(const std::string &pattern, std::string &error) {
  if (pattern.empty())
    return true; // ByteLevel without a regex: each segment is one piece
  int code = 0;
  PCRE2_SIZE offset = 0;
  regex = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()),
                        pattern.size(), PCRE2_UTF | PCRE2_UCP, &code,
                        &offset, nullptr);
  if (!regex) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(code, message, sizeof(message));
    error = "'" + name + "': cannot compile its pre-tokenizer regex at " +
            std::to_string(offset) + ": " +
            reinterpret_cast<const char *>(message);
    return false;
  }
  matchData = pcre2_match_data_create_from_pattern(regex, nullptr);
  return true;
}

bool ByteLevelBpe::encodeSplit(std::string_view text, std::vector<uint32_t> &ids,
                 std::string &error) const {
  if (text.empty())
    return true;
  if (!regex)
    return encodeWord(text, ids, error);
  std::lock_guard<std::mutex> lock(mutex);
  size_t gap = 0, from = 0;
  while (from < text.size()) {
    int found = pcre2_match(regex, reinterpret_cast<PCRE2_SPTR>(text.data()),
                            text.size(), from, 0, matchData, nullptr);
    if (found == PCRE2_ERROR_NOMATCH)
      break;
    if (found < 0) {
      error = "the text is not valid UTF-8 near byte " + std::to_string(from);
      return false;
    }
    PCRE2_SIZE *span = pcre2_get_ovector_pointer(matchData);
    size_t begin = span[0], end = span[1];
    if (begin > gap && !encodeWord(text.substr(gap, begin - gap), ids, error))
      return false;
    gap = begin;
    if (end == begin) {
      // Search on from the next character; the gap runs on from here.
      from = begin + 1;
      while (from < text.size() && (uint8_t(text[from]) & 0xC0) == 0x80)
        ++from;
      continue;
    }
    if (!encodeWord(text.substr(begin, end - begin), ids, error))
      return false;
    gap = from = end;
  }
  if (gap < text.size())
    return encodeWord(text.substr(gap), ids, error);
  return true;
}

bool ByteLevelBpe::encodeWord(std::string_view piece, std::vector<uint32_t> &ids,
                std::string &error) const {
  std::string key(piece);
  if (auto it = cache.find(key); it != cache.end()) {
    ids.insert(ids.end(), it->second.begin(), it->second.end());
    return true;
  }
  const std::vector<std::string> &bytes = getByteSymbols();
  std::vector<std::string> symbols;
  std::string whole;
  for (char c : piece) {
    symbols.push_back(bytes[uint8_t(c)]);
    whole += symbols.back();
  }
  std::vector<uint32_t> out;
  if (auto id = lookup(whole); ignoreMerges && id) {
    out.push_back(*id);
  } else {
    while (symbols.size() > 1) {
      int best = INT_MAX;
      size_t at = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        auto it = ranks.find(symbols[i] + '\0' + symbols[i + 1]);
        if (it != ranks.end() && it->second < best) {
          best = it->second;
          at = i;
        }
      }
      if (best == INT_MAX)
        break;
      // Every occurrence of the pair, left to right.
      std::string a = symbols[at], b = symbols[at + 1];
      std::vector<std::string> merged;
      for (size_t i = 0; i < symbols.size(); ++i)
        if (i + 1 < symbols.size() && symbols[i] == a &&
            symbols[i + 1] == b) {
          merged.push_back(a + b);
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      symbols = std::move(merged);
    }
    for (const std::string &s : symbols) {
      std::optional<uint32_t> id = lookup(s);
      if (!id)
        id = unknown;
      if (!id) {
        error = "'" + name + "' has no token for a piece of '" + key +
                "' and no unk_token";
        return false;
      }
      out.push_back(*id);
    }
  }
  ids.insert(ids.end(), out.begin(), out.end());
  cache.emplace(std::move(key), std::move(out));
  return true;
}


} // namespace

std::unique_ptr<Tokenizer> openTokenizerJson(const std::string &path,
                                             std::string &error) {
  auto t = std::make_unique<ByteLevelBpe>();
  if (!t->loadTokenizerJson(path, error))
    return nullptr;
  return t;
}

std::unique_ptr<Tokenizer> openVocabAndMerges(const std::string &vocab,
                                              const std::string &merges,
                                              std::string &error) {
  auto t = std::make_unique<ByteLevelBpe>();
  if (!t->loadVocabAndMerges(vocab, merges, error))
    return nullptr;
  return t;
}

} // namespace sluice::tok
