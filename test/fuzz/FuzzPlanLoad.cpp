//===- FuzzPlanLoad.cpp - libFuzzer target: the runtime's plan loader -----===//
//
// Any bytes as a plan file: sluice-run's loader must accept a plan whose
// every field it checked, or refuse it with a message, never crash
// (docs/plan-format.md). An accepted plan is then described, instruction
// by instruction, as the executor's messages do.
//
//===----------------------------------------------------------------------===//

#include "Plan.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  sluice::rt::Plan plan;
  sluice::rt::Status status = sluice::rt::parsePlan(text, "fuzz", plan);
  if (!status)
    return 0;
  size_t described = 0;
  for (const sluice::rt::DeviceProgram &program : plan.programs)
    for (const sluice::rt::Instruction &instr : program.instructions)
      described += plan.describe(instr).size();
  // An accepted plan has a message for every instruction.
  if (described == 0 && !plan.programs.empty() &&
      !plan.programs.front().instructions.empty())
    __builtin_trap();
  return 0;
}
