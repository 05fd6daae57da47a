//===- sluice-tokenize.cpp - Byte-level tokenizer -------------------------===//
//
//   sluice-tokenize corpus.txt -o tokens.bin [--dtype uint16|uint32]
//
// Writes every byte of the input as one little-endian token (vocabulary
// 256), the format `sluice-run --data` reads. The demo's tokenizer: no
// merges, no special tokens, lossless.
//
//===----------------------------------------------------------------------===//

#include "sluice/Version.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileOutputBuffer.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

static cl::OptionCategory category("sluice-tokenize options");
static cl::opt<std::string> input(cl::Positional, cl::desc("<text file>"),
                                  cl::Required, cl::cat(category));
static cl::opt<std::string> output("o", cl::desc("Token file to write"),
                                   cl::value_desc("FILE"), cl::Required,
                                   cl::cat(category));
static cl::opt<std::string> dtype("dtype",
                                  cl::desc("token width: uint16 or uint32"),
                                  cl::init("uint16"), cl::cat(category));

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  sluice::setVersionPrinter();
  cl::ParseCommandLineOptions(argc, argv, "byte-level tokenizer\n");
  if (dtype != "uint16" && dtype != "uint32") {
    errs() << "sluice-tokenize: error: unknown --dtype '" << dtype
           << "' (expected uint16 or uint32)\n";
    return 1;
  }
  auto text = MemoryBuffer::getFile(input);
  if (!text) {
    errs() << "sluice-tokenize: error: cannot read '" << input
           << "': " << text.getError().message() << "\n";
    return 1;
  }
  StringRef bytes = (*text)->getBuffer();
  size_t width = dtype == "uint16" ? 2 : 4;
  // FileOutputBuffer writes to a temporary file and renames it on commit.
  auto out = FileOutputBuffer::create(output, bytes.size() * width);
  if (!out) {
    errs() << "sluice-tokenize: error: cannot write '" << output
           << "': " << toString(out.takeError()) << "\n";
    return 1;
  }
  uint8_t *dst = (*out)->getBufferStart();
  for (size_t i = 0; i < bytes.size(); ++i) {
    uint32_t token = static_cast<unsigned char>(bytes[i]);
    for (size_t b = 0; b < width; ++b)
      dst[i * width + b] = uint8_t(token >> (8 * b));
  }
  if (Error e = (*out)->commit()) {
    errs() << "sluice-tokenize: error: cannot write '" << output
           << "': " << toString(std::move(e)) << "\n";
    return 1;
  }
  outs() << "sluice-tokenize: " << bytes.size()
         << " tokens (vocabulary 256) -> " << output << "\n";
  return 0;
}
