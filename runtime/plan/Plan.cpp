//===- Plan.cpp - A plan, loaded and proved -------------------------------===//
//
// Loading a plan is reading every field (PlanReader.cpp) and proving the
// whole before any work (PlanValidator.cpp); what the executor asks of a
// loaded plan is here.
//
//===----------------------------------------------------------------------===//

#include "Plan.h"

#include "InputFile.h"

#include "PlanJson.h"
#include "sluice/PlanFormat/Json.h"

#include <fstream>
#include <sstream>

namespace sluice::rt {

using namespace planfile;

VocabularyShape Plan::getVocabularyShape() const {
  VocabularyShape shape;
  shape.input = vocabulary.input.present;
  shape.output = vocabulary.output.present;
  shape.algorithm = vocabulary.algorithm;
  shape.inputRoot = vocabulary.input.root;
  shape.outputRoot = vocabulary.output.root;
  shape.lastStage = getLastStage();
  shape.splitBackward = splitBackward;
  return shape;
}

std::optional<CollectiveRef>
Plan::getCollectiveInput(const Instruction &exec) const {
  if (exec.op != Op::Exec)
    return std::nullopt;
  return rt::getCollectiveInput(getVocabularyShape(), exec.pass, exec.shard,
                                exec.stage);
}

bool Plan::contributes(CollectiveRef ref, int device, Pass pass, int stage,
                       Shard execShard) const {
  return rt::contributes(getVocabularyShape(), ref, device, pass, stage,
                         execShard);
}

SliceShape Plan::getSliceShape(int slice) const {
  int64_t offset = 0;
  for (int k = 0; k < slice; ++k)
    offset += slices[k];
  // Under context parallelism a rank runs its share of every slice.
  return {model.microBatch, slices[slice] / cp, offset, cp};
}

std::string Plan::describe(const Instruction &instr) const {
  std::ostringstream os;
  if (instr.op == Op::GradSync) {
    os << "grad_sync of ";
    if (instr.shard != Shard::None)
      os << "the " << shardName(instr.shard) << " shard";
    else
      os << "stage " << instr.stage;
    return os.str();
  }
  if (instr.op == Op::Collective) {
    os << "collective " << instr.group << " of the " << shardName(instr.shard)
       << " shard, microbatch " << instr.mb << ", slice " << instr.slice;
    return os.str();
  }
  os << (instr.op == Op::Exec   ? "exec "
         : instr.op == Op::Send ? "send "
                                : "recv ")
     << passName(instr.pass);
  if (instr.shard != Shard::None)
    os << " of the " << shardName(instr.shard) << " shard";
  else
    os << " of stage " << instr.stage;
  os << ", microbatch " << instr.mb << ", slice " << instr.slice;
  if (instr.op != Op::Exec)
    os << (instr.op == Op::Send ? " to device " : " from device ")
       << instr.peer;
  return os.str();
}

Status parsePlan(const std::string &textIn, const std::string &origin,
                 Plan &plan) {
  try {
    readPlan(parseJson(textIn), plan);
    validate(plan);
  } catch (const PlanError &e) {
    return Status::error(origin + ": " + e.message);
  } catch (const json::exception &e) {
    return Status::error(origin + ": malformed plan: " + e.what());
  }
  return Status::ok();
}

Status Plan::setPrecision(const Precision &run) {
  if (run == precision)
    return Status::ok();
  Precision compiled = precision;
  precision = run;
  try {
    validate(*this);
  } catch (const PlanError &e) {
    precision = compiled;
    return Status::error(
        "the plan was compiled for " + std::string(compiled.getName()) +
        " and cannot run in " + run.getName() + ": " + e.message +
        "; compile it with --precision " + run.getName());
  }
  return Status::ok();
}

Status loadPlan(const std::string &path, Plan &plan) {
  std::ifstream in;
  if (Status st = openInputFile(path, "plan", in); !st)
    return st;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parsePlan(buffer.str(), path, plan);
}

} // namespace sluice::rt
