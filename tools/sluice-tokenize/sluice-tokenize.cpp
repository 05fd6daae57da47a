//===- sluice-tokenize.cpp - Tokenize a corpus for sluice-run -------------===//
//
//   sluice-tokenize INPUT... -o corpus.tokens [--tokenizer PATH|byte]
//       [--dtype auto|uint16|uint32] [--document-per-line] [--no-markers]
//   sluice-tokenize INPUT... --tokenizer PATH --print
//   sluice-tokenize IDS... --tokenizer PATH --decode
//
// Tokenizes text files (each a document, or each line one) and JSON Lines
// files (each line's "text" a document) into a token dataset
// (include/sluice/PlanFormat/TokenDataset.h): the tokens, the document
// boundaries, and a header naming the element type, the vocabulary and
// the tokenizer. Each document starts with the tokenizer's begin-of-text
// token and ends with its end-of-text token, where it has them.
//
//===----------------------------------------------------------------------===//

#include "sluice/PlanFormat/TokenDataset.h"
#include "sluice/Tokenizer/Tokenizer.h"
#include "sluice/Support/Flags.h"
#include "sluice/Version.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileOutputBuffer.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "sluice/PlanFormat/Json.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>

using namespace llvm;

static cl::OptionCategory category("sluice-tokenize options");
static cl::list<std::string>
    inputs(cl::Positional, cl::desc("<text or .jsonl files>"), cl::OneOrMore,
           cl::cat(category));
static cl::opt<std::string>
    output("o", cl::desc("The token dataset to write (for sluice-run --data)"),
           cl::value_desc("FILE"), cl::cat(category));
static cl::opt<std::string> tokenizerPath(
    "tokenizer",
    cl::desc("byte (default: a token per byte), a SentencePiece model "
             "(tokenizer.model), a tokenizer.json, a GPT-2 vocab.json (with "
             "merges.txt beside it), or a Hugging Face model directory"),
    cl::value_desc("PATH"), cl::init("byte"), cl::cat(category));
static cl::opt<std::string>
    dtype("dtype",
          cl::desc("Token width: auto (default: uint16 when the vocabulary "
                   "fits), uint16 or uint32"),
          cl::init("auto"), cl::cat(category));
static cl::opt<bool> perLine(
    "document-per-line",
    cl::desc("Each line of a text file is a document (default: each file)"),
    cl::cat(category));
static cl::opt<bool> noMarkers(
    "no-markers",
    cl::desc("Add no begin- or end-of-text tokens around documents"),
    cl::cat(category));
static cl::opt<bool>
    print("print",
          cl::desc("Print each document's ids, one line each, instead of "
                   "writing a dataset"),
          cl::cat(category));
static cl::opt<bool>
    decodeIds("decode",
              cl::desc("Read ids (whitespace-separated, a sequence per line; "
                       "- reads stdin) and print each line's text: --print "
                       "backwards, and a model's output made readable"),
              cl::cat(category));

[[noreturn]] static void fail(const Twine &message) {
  errs() << "sluice-tokenize: error: " << message << "\n";
  std::exit(1);
}

/// The documents of one input file.
static std::vector<std::string> readDocuments(const std::string &path) {
  auto file = MemoryBuffer::getFile(path, /*IsText=*/false,
                                    /*RequiresNullTerminator=*/false);
  if (!file)
    fail("cannot read '" + path + "': " + file.getError().message());
  StringRef text = (*file)->getBuffer();
  std::vector<std::string> documents;
  if (StringRef(path).ends_with(".jsonl")) {
    int number = 0;
    for (StringRef rest = text; !rest.empty();) {
      auto [line, tail] = rest.split('\n');
      rest = tail;
      ++number;
      if (line.trim().empty())
        continue;
      try {
        nlohmann::json record = sluice::parseJson(line.str());
        documents.push_back(record.at("text").get<std::string>());
      } catch (const nlohmann::json::exception &e) {
        fail("'" + path + "' line " + Twine(number) +
             ": not a JSON object with a \"text\" string: " + e.what());
      }
    }
  } else if (perLine) {
    for (StringRef rest = text; !rest.empty();) {
      auto [line, tail] = rest.split('\n');
      rest = tail;
      if (!line.empty())
        documents.push_back(line.str());
    }
  } else {
    documents.push_back(text.str());
  }
  return documents;
}

/// --decode: each line of ids of each input (- is stdin) as its text.
static int decodeFiles(const sluice::tok::Tokenizer &tokenizer) {
  for (const std::string &path : inputs) {
    auto file = MemoryBuffer::getFileOrSTDIN(path);
    if (!file)
      fail("cannot read '" + path + "': " + file.getError().message());
    int number = 0;
    for (StringRef rest = (*file)->getBuffer(); !rest.empty();) {
      auto [line, tail] = rest.split('\n');
      rest = tail;
      ++number;
      std::vector<uint32_t> ids;
      SmallVector<StringRef> words;
      line.split(words, ' ', -1, /*KeepEmpty=*/false);
      for (StringRef word : words) {
        word = word.trim();
        uint32_t id = 0;
        if (word.empty())
          continue;
        if (word.getAsInteger(10, id))
          fail("'" + path + "' line " + Twine(number) + ": '" + word +
               "' is not a token id");
        ids.push_back(id);
      }
      std::string text, error;
      if (!tokenizer.decode(ids, text, error))
        fail("'" + path + "' line " + Twine(number) + ": " + error);
      outs() << text << "\n";
    }
  }
  return 0;
}

/// The tokenizer's file as an absolute path (in a directory, the file
/// openTokenizer reads there), or "" for the byte tokenizer.
static std::string getTokenizerFile(const std::string &path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty() || path == "byte")
    return "";
  fs::path file = path;
  if (fs::is_directory(file, ec))
    for (const char *name : {"tokenizer.json", "tokenizer.model", "vocab.json"})
      if (fs::exists(file / name, ec)) {
        file /= name;
        break;
      }
  return fs::absolute(file, ec).lexically_normal().string();
}

/// The dataset file: magic, header length, header, document offsets,
/// tokens (include/sluice/PlanFormat/TokenDataset.h), written whole to a
/// temporary file and renamed.
static void writeDataset(const nlohmann::json &header, const std::string &type,
                         const std::vector<uint64_t> &offsets,
                         const std::vector<uint32_t> &tokens) {
  std::string json = header.dump();
  size_t width = type == "uint16" ? 2 : 4;
  uint64_t at = sluice::getTokenDatasetOffsetsAt(json.size());
  size_t bytes = at + offsets.size() * 8 + tokens.size() * width;
  // FileOutputBuffer writes to a temporary file and renames it on commit.
  auto out = FileOutputBuffer::create(output, bytes);
  if (!out)
    fail("cannot write '" + output + "': " + toString(out.takeError()));
  uint8_t *dst = (*out)->getBufferStart();
  std::memset(dst, 0, bytes);
  auto put = [&](uint64_t offset, uint64_t value, size_t n) {
    for (size_t b = 0; b < n; ++b)
      dst[offset + b] = uint8_t(value >> (8 * b));
  };
  std::memcpy(dst, sluice::kTokenDatasetMagic, 8);
  put(8, json.size(), 8);
  std::memcpy(dst + 16, json.data(), json.size());
  for (size_t i = 0; i < offsets.size(); ++i)
    put(at + i * 8, offsets[i], 8);
  at += offsets.size() * 8;
  for (size_t i = 0; i < tokens.size(); ++i)
    put(at + i * width, tokens[i], width);
  if (Error e = (*out)->commit())
    fail("cannot write '" + output + "': " + toString(std::move(e)));
}

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  sluice::setVersionPrinter();
  if (!sluice::parseFlags(argc, argv,
                              "sluice-tokenize: tokenize a corpus for "
                              "sluice-run --data\n"))
    return 1;
  if (dtype != "auto" && dtype != "uint16" && dtype != "uint32")
    fail("unknown --dtype '" + dtype + "' (expected auto, uint16 or uint32)");
  if (decodeIds && (print || !output.empty()))
    fail("--decode prints text: give neither -o nor --print with it");
  if (!decodeIds && output.empty() == !print)
    fail("give -o FILE (a dataset), --print (the ids) or --decode (text from "
         "ids), one of them");
  std::string error;
  std::unique_ptr<sluice::tok::Tokenizer> tokenizer =
      sluice::tok::openTokenizer(tokenizerPath, error);
  if (!tokenizer)
    fail(error);
  for (const std::string &warning : tokenizer->getWarnings())
    errs() << "sluice-tokenize: warning: " << warning << "\n";
  if (decodeIds)
    return decodeFiles(*tokenizer);
  int64_t vocab = tokenizer->getVocabSize();
  std::string type = dtype == "auto" ? (vocab <= 65536 ? "uint16" : "uint32")
                                     : std::string(dtype);
  if (type == "uint16" && vocab > 65536)
    fail("the vocabulary of " + tokenizer->describe() + " has " +
         Twine(vocab) + " tokens, more than uint16 holds: use --dtype uint32");
  std::optional<uint32_t> bos, eos;
  if (!noMarkers) {
    bos = tokenizer->getBeginOfText();
    eos = tokenizer->getEndOfText();
  }

  std::vector<uint32_t> tokens;
  std::vector<uint64_t> offsets = {0};
  for (const std::string &path : inputs)
    for (const std::string &document : readDocuments(path)) {
      size_t first = tokens.size();
      if (bos)
        tokens.push_back(*bos);
      if (!tokenizer->encode(document, tokens, error))
        fail("'" + path + "': " + error);
      if (eos)
        tokens.push_back(*eos);
      if (print) {
        for (size_t i = first; i < tokens.size(); ++i)
          outs() << (i == first ? "" : " ") << tokens[i];
        outs() << "\n";
      }
      offsets.push_back(tokens.size());
    }
  if (print)
    return 0;

  nlohmann::json header = {{"format", "sluice-tokens"},
                           {"version", sluice::kTokenDatasetVersion},
                           {"dtype", type},
                           {"vocab", vocab},
                           {"documents", offsets.size() - 1},
                           {"tokens", tokens.size()},
                           {"tokenizer", tokenizer->describe()},
                           {"bos", bos ? nlohmann::json(*bos) : nullptr},
                           {"eos", eos ? nlohmann::json(*eos) : nullptr}};
  // Where the tokenizer is, and its own markers (whether or not the
  // documents carry them): sluice-run --save-hf puts both into the
  // Hugging Face directory it writes, so that AutoTokenizer loads it.
  if (std::string file = getTokenizerFile(tokenizerPath); !file.empty()) {
    std::optional<uint32_t> first = tokenizer->getBeginOfText(),
                            last = tokenizer->getEndOfText();
    header["tokenizer_file"] = file;
    header["tokenizer_bos"] = first ? nlohmann::json(*first) : nullptr;
    header["tokenizer_eos"] = last ? nlohmann::json(*last) : nullptr;
  }
  writeDataset(header, type, offsets, tokens);
  outs() << "sluice-tokenize: " << offsets.size() - 1 << " document"
         << (offsets.size() == 2 ? "" : "s") << ", " << tokens.size()
         << " tokens (" << tokenizer->describe() << ", vocabulary " << vocab
         << ", " << type << ") -> " << output << "\n";
  return 0;
}
