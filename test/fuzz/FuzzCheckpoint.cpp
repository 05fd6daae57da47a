//===- FuzzCheckpoint.cpp - libFuzzer target: checkpoint rank files -------===//
//
// Any bytes as a checkpoint's rank file (its manifest names it): every
// count it gives is checked against its bytes before anything is
// allocated, and it loads or is refused with a message, never crashes.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "FuzzFiles.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace sluice;
  static const bool manifest = [] {
    std::string text = R"({"format": "sluice-checkpoint", "version": 3,
      "step": 1, "files": ["rank-0.step-1.bin"]})";
    fuzz::writeInput("checkpoint.json",
                     reinterpret_cast<const uint8_t *>(text.data()),
                     text.size());
    return true;
  }();
  (void)manifest;
  fuzz::writeInput("rank-0.step-1.bin", data, size);
  int64_t step = 0;
  (void)rt::loadCheckpoint(fuzz::getWorkDir(), -1, fuzz::getTinyParameters(),
                           step);
  return 0;
}
