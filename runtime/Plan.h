//===- Plan.h - A loaded, validated plan ------------------------*- C++ -*-===//
//
// The plan file (docs/plan-format.md) parsed into plain data and checked
// once, whole, before anything runs: version, model features this runtime
// implements, stages, every instruction's fields, buffer indices and sizes
// (against the runtime's own layout), and that every receive has exactly
// one matching send. The executor's hot loop then only dispatches.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_PLAN_H
#define SLUICE_RUNTIME_PLAN_H

#include "Layout.h"
#include "ModelConfig.h"
#include "Status.h"

#include <string>
#include <vector>

namespace sluice::rt {

constexpr int kPlanVersion = 1;

enum class Pass : uint8_t { F, B, W, BW };
enum class Op : uint8_t { Exec, Send, Recv };

struct Instruction {
  Op op = Op::Exec;
  Pass pass = Pass::F;
  int32_t stage = 0, mb = 0, slice = 0;
  // exec: buffer slots (-1: none).
  int32_t state = -1, wstate = -1, kv = -1, in = -1, out = -1;
  // send/recv.
  int32_t peer = -1, buffer = -1;
  int64_t key = -1;
};

struct DeviceProgram {
  int device = 0;
  std::vector<int64_t> buffers; // bytes per slot
  std::vector<Instruction> instructions;
};

struct StagePlan {
  std::string name;
  int device = 0;
  int chunk = 0;
  std::vector<int> layers;
};

struct Plan {
  ModelConfig model;
  std::string schedule;
  int devices = 0;
  int microbatches = 0;
  std::vector<int64_t> slices; // token lengths
  bool splitBackward = false;
  std::vector<StagePlan> stages;
  std::vector<DeviceProgram> programs;

  SliceShape getSliceShape(int slice) const;
  /// "exec F of stage 2, microbatch 3, slice 0": for messages naming one.
  std::string describe(const Instruction &instr) const;
};

/// Reads and validates a plan file. The error names the file and what is
/// wrong with it.
Status loadPlan(const std::string &path, Plan &plan);
/// The same from text (for tests); `origin` names it in errors.
Status parsePlan(const std::string &text, const std::string &origin,
                 Plan &plan);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_PLAN_H
