//===- Pipeline.cpp - Work dependencies and lowering to instructions ------===//

#include "sluice/Schedule/Pipeline.h"
#include "sluice/Schedule/TimeOrders.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <array>
#include <numeric>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

bool sched::isVocabPass(PassKind kind) {
  switch (kind) {
  case PassKind::S:
  case PassKind::S2:
  case PassKind::T:
  case PassKind::IF:
  case PassKind::IB:
    return true;
  default:
    return false;
  }
}

llvm::SmallVector<PassKind, 3> VocabLayers::getOutputPasses() const {
  if (algorithm == 0)
    return {PassKind::S, PassKind::S2, PassKind::T};
  return {PassKind::S, PassKind::T};
}

int VocabLayers::getNumGroups(ShardKind shard) const {
  rt::VocabularyShape shape;
  shape.input = input;
  shape.output = output;
  shape.algorithm = algorithm;
  return shape.getNumGroups(shard == ShardKind::Input ? rt::Shard::Input
                                                      : rt::Shard::Output);
}

int Pipeline::getWorkDevice(const Work &work) const {
  return isVocabPass(work.kind) ? work.stage : getDevice(work.stage);
}

std::string sched::toString(const Work &work) {
  if (isVocabPass(work.kind))
    return llvm::formatv("{0} of the vocabulary shard on device {1}, "
                         "microbatch {2}, slice {3}",
                         stringifyPassKind(work.kind), work.stage,
                         work.microbatch, work.slice)
        .str();
  return llvm::formatv("{0} of stage {1}, microbatch {2}, slice {3}",
                       stringifyPassKind(work.kind), work.stage,
                       work.microbatch, work.slice)
      .str();
}

std::string sched::toString(const CollectiveId &id) {
  return llvm::formatv("collective {0} of the {1} shard, microbatch {2}, "
                       "slice {3}",
                       id.group,
                       id.shard == ShardKind::Input ? "input" : "output",
                       id.microbatch, id.slice)
      .str();
}

std::vector<CollectiveId> sched::getCollectives(const Pipeline &pipeline) {
  std::vector<CollectiveId> ids;
  for (int mb = 0; mb < pipeline.microbatches; ++mb)
    for (int k = 0; k < pipeline.slices; ++k)
      for (ShardKind shard : {ShardKind::Input, ShardKind::Output})
        for (int g = 0; g < pipeline.vocab.getNumGroups(shard); ++g)
          ids.push_back({shard, g, mb, k});
  return ids;
}

llvm::SmallVector<PassKind, 3> sched::getStagePasses(const Pipeline &pipeline) {
  if (pipeline.splitBackward)
    return {PassKind::F, PassKind::B, PassKind::W};
  return {PassKind::F, PassKind::BW};
}

/// The shard passes each device runs per microbatch slice.
static llvm::SmallVector<PassKind, 5> getShardPasses(const Pipeline &pipeline) {
  llvm::SmallVector<PassKind, 5> kinds;
  if (pipeline.vocab.input)
    kinds.append({PassKind::IF, PassKind::IB});
  if (pipeline.vocab.output)
    kinds.append(pipeline.vocab.getOutputPasses());
  return kinds;
}

std::vector<Work> sched::getAllWork(const Pipeline &pipeline) {
  std::vector<Work> all;
  auto add = [&](PassKind kind, int stage) {
    for (int mb = 0; mb < pipeline.microbatches; ++mb)
      for (int k = 0; k < pipeline.slices; ++k)
        all.push_back({kind, stage, mb, k});
  };
  for (int s = 0; s < pipeline.getNumStages(); ++s)
    for (PassKind kind : getStagePasses(pipeline))
      add(kind, s);
  for (int d = 0; d < pipeline.devices; ++d)
    for (PassKind kind : getShardPasses(pipeline))
      add(kind, d);
  return all;
}

bool sched::hasWork(const Pipeline &pipeline, const Work &work) {
  if (work.microbatch < 0 || work.microbatch >= pipeline.microbatches ||
      work.slice < 0 || work.slice >= pipeline.slices || work.stage < 0)
    return false;
  if (isVocabPass(work.kind))
    return work.stage < pipeline.devices &&
           llvm::is_contained(getShardPasses(pipeline), work.kind);
  return work.stage < pipeline.getNumStages() &&
         llvm::is_contained(getStagePasses(pipeline), work.kind);
}

void sched::getDependencies(const Pipeline &pipeline, const Work &work,
                            llvm::SmallVectorImpl<Work> &deps) {
  auto at = [&](PassKind kind, int stage, int slice) {
    return Work{kind, stage, work.microbatch, slice};
  };
  PassKind backward = pipeline.getBackwardKind();
  switch (work.kind) {
  case PassKind::F:
    if (work.stage > 0)
      deps.push_back(at(PassKind::F, work.stage - 1, work.slice));
    // Causal attention: slice k reads the keys and values of slices < k.
    if (work.slice > 0)
      deps.push_back(at(PassKind::F, work.stage, work.slice - 1));
    break;
  case PassKind::B:
  case PassKind::BW:
    if (work.stage < pipeline.getLastStage())
      deps.push_back(at(backward, work.stage + 1, work.slice));
    else
      deps.push_back(at(PassKind::F, work.stage, work.slice));
    // Slice k's keys and values receive gradients from every later slice,
    // so the backward runs in reverse slice order.
    if (work.slice + 1 < pipeline.slices)
      deps.push_back(at(work.kind, work.stage, work.slice + 1));
    break;
  case PassKind::W:
    deps.push_back(at(PassKind::B, work.stage, work.slice));
    break;
  // A shard's later passes read what its earlier ones kept on the device
  // (the logits, the local softmax).
  case PassKind::S2:
    deps.push_back(at(PassKind::S, work.stage, work.slice));
    break;
  case PassKind::T:
    deps.push_back(
        at(pipeline.vocab.algorithm == 0 ? PassKind::S2 : PassKind::S,
           work.stage, work.slice));
    break;
  default:
    break;
  }
}

// The two enums are matched by name once, not per call: the collective
// rules run for every work unit the simulator and the refiners step.
rt::Pass sched::toPlanPass(PassKind kind) {
  static const std::array<rt::Pass, kNumPassKinds> table = [] {
    std::array<rt::Pass, kNumPassKinds> passes{};
    for (size_t k = 0; k < kNumPassKinds; ++k) {
      std::optional<rt::Pass> pass =
          rt::parsePass(stringifyPassKind(PassKind(k)));
      assert(pass && "a pass kind the plan format cannot spell");
      passes[k] = *pass;
    }
    return passes;
  }();
  return table[size_t(kind)];
}

PassKind sched::fromPlanPass(rt::Pass pass) {
  static const std::array<PassKind, rt::kNumPasses> table = [] {
    std::array<PassKind, rt::kNumPasses> kinds{};
    for (int p = 0; p < rt::kNumPasses; ++p) {
      std::optional<PassKind> kind =
          symbolizePassKind(rt::passName(rt::Pass(p)));
      assert(kind && "a plan pass the dialect cannot spell");
      kinds[p] = *kind;
    }
    return kinds;
  }();
  return table[size_t(pass)];
}

rt::VocabularyShape sched::getVocabularyShape(const Pipeline &pipeline) {
  rt::VocabularyShape shape;
  shape.input = pipeline.vocab.input;
  shape.output = pipeline.vocab.output;
  shape.algorithm = pipeline.vocab.algorithm;
  shape.inputRoot = pipeline.getInputRoot();
  shape.outputRoot = pipeline.getOutputRoot();
  shape.lastStage = pipeline.getLastStage();
  shape.splitBackward = pipeline.splitBackward;
  return shape;
}

static ShardKind toShardKind(rt::Shard shard) {
  return shard == rt::Shard::Input ? ShardKind::Input : ShardKind::Output;
}

void sched::getCollectiveInputs(const Pipeline &pipeline, const Work &work,
                                llvm::SmallVectorImpl<CollectiveId> &inputs) {
  rt::Pass pass = toPlanPass(work.kind);
  if (std::optional<rt::CollectiveRef> ref =
          rt::getCollectiveInput(getVocabularyShape(pipeline), pass,
                                 rt::getPassShard(pass), work.stage))
    inputs.push_back(
        {toShardKind(ref->shard), ref->group, work.microbatch, work.slice});
}

void sched::getCollectiveContributions(
    const Pipeline &pipeline, const CollectiveId &id, int device,
    llvm::SmallVectorImpl<Work> &contributions) {
  rt::Shard shard =
      id.shard == ShardKind::Input ? rt::Shard::Input : rt::Shard::Output;
  std::optional<rt::Contributor> c =
      rt::getContributor(getVocabularyShape(pipeline), {shard, id.group});
  if (!c || (c->device >= 0 && c->device != device))
    return;
  // A shard pass's work names its device where a stage's names the stage.
  int stage = c->shard == rt::Shard::None ? c->stage : device;
  contributions.push_back(
      {fromPlanPass(c->pass), stage, id.microbatch, id.slice});
}

void sched::getAllDependencies(const Pipeline &pipeline, const Work &work,
                               llvm::SmallVectorImpl<Work> &deps) {
  getDependencies(pipeline, work, deps);
  llvm::SmallVector<CollectiveId, 2> inputs;
  getCollectiveInputs(pipeline, work, inputs);
  for (const CollectiveId &id : inputs)
    for (int d = 0; d < pipeline.devices; ++d)
      getCollectiveContributions(pipeline, id, d, deps);
}

int sched::getConsumerStage(const Pipeline &pipeline, const Work &work) {
  if (work.kind == PassKind::F)
    return work.stage < pipeline.getLastStage() ? work.stage + 1 : -1;
  if (work.kind == PassKind::B || work.kind == PassKind::BW)
    return work.stage > 0 ? work.stage - 1 : -1;
  return -1;
}

/// Unit durations for ordering collectives: compute passes 1, BW 2, shard
/// passes a little. With zero durations a pass could "finish" when the pass
/// before it starts, and the collective order would contradict the lists.
static double getOrderingDuration(const Work &work) {
  return isVocabPass(work.kind) ? 0.01 : work.kind == PassKind::BW ? 2.0 : 1.0;
}

namespace {
/// lowerToProgram's steps: one global order of the collectives, then each
/// device's list with its receives, sends and collectives placed.
class ProgramLowering {
public:
  ProgramLowering(const Pipeline &pipeline,
                  llvm::ArrayRef<std::vector<Work>> orders,
                  llvm::ArrayRef<std::vector<char>> pairs)
      : pipeline(pipeline), orders(orders), pairs(pairs), index(pipeline),
        cindex(pipeline),
        ready(cindex.size(), 0.0), blocking(pipeline.vocab.synchronous) {}

  /// One global collective order, that of an execution of the orders: a
  /// device that needs collective c has run every contribution to the
  /// ones before it, so issuing in this order never waits on its own
  /// future.
  LogicalResult orderCollectives(std::string &error) {
    collectives = getCollectives(pipeline);
    if (collectives.empty())
      return success();
    // The devices run `orders` as early as their dependencies allow, a
    // collective completing with its last contribution (timeOrders, with
    // no transfer time).
    if (!timeOrders(pipeline, orders, Durations{getOrderingDuration}, error,
                    &execution))
      return failure();
    for (const CollectiveId &id : collectives) {
      contributions.clear();
      for (int d = 0; d < pipeline.devices; ++d)
        getCollectiveContributions(pipeline, id, d, contributions);
      for (const Work &work : contributions)
        ready[cindex(id)] =
            std::max(ready[cindex(id)], execution.end[index(work)]);
    }
    std::stable_sort(collectives.begin(), collectives.end(),
                     [&](const CollectiveId &a, const CollectiveId &b) {
                       return ready[cindex(a)] < ready[cindex(b)];
                     });
    return success();
  }

  /// `device`'s list: its order, a receive right before the first work
  /// that needs another device's result, a send right after a work whose
  /// result another device consumes, and the collectives where
  /// getIssuePositions puts them.
  LogicalResult lowerDevice(int device, std::vector<Instr> &instrs,
                            std::string &error) {
    const std::vector<Work> &order = orders[device];
    instrs.reserve(order.size() * 2);
    // Each work's position in the order, for the collectives: one table
    // for every device, its entries set and reset per device (a table per
    // device was a twentieth of a p 64 compile, filling it).
    if (!collectives.empty() && position.empty())
      position.assign(index.size(), -1);
    for (int i = 0; i < int(order.size()) && !collectives.empty(); ++i)
      position[index(order[i])] = i;
    FailureOr<std::vector<int>> issueAt =
        getIssuePositions(device, position, error);
    for (int i = 0; i < int(order.size()) && !collectives.empty(); ++i)
      position[index(order[i])] = -1;
    if (failed(issueAt))
      return failure();
    // Issue in the global order, each where it goes.
    std::vector<size_t> byPosition(collectives.size());
    std::iota(byPosition.begin(), byPosition.end(), 0);
    std::stable_sort(
        byPosition.begin(), byPosition.end(),
        [&](size_t a, size_t b) { return (*issueAt)[a] < (*issueAt)[b]; });
    size_t next = 0;
    std::vector<bool> issued(collectives.empty() ? 0 : cindex.size(), false);
    auto issueUpTo = [&](int i) {
      for (; next < byPosition.size() && (*issueAt)[byPosition[next]] <= i;
           ++next) {
        const CollectiveId &id = collectives[byPosition[next]];
        issued[cindex(id)] = true;
        instrs.push_back(Instr::coll(id, blocking));
      }
    };
    llvm::SmallVector<Work, 4> deps;
    llvm::SmallVector<CollectiveId, 2> inputs;
    auto receive = [&](const Work &work) -> LogicalResult {
      deps.clear();
      getDependencies(pipeline, work, deps);
      for (const Work &dep : deps) {
        int from = pipeline.getWorkDevice(dep);
        if (from != device)
          instrs.push_back(Instr::recv(dep, from));
      }
      inputs.clear();
      getCollectiveInputs(pipeline, work, inputs);
      for (const CollectiveId &id : inputs)
        if (!issued[cindex(id)]) {
          error = llvm::formatv(
              "device {0} cannot run {1}: it needs {2}, which it cannot "
              "issue before its part of {3} (every device issues the "
              "collectives in the same order)",
              device, toString(work), toString(id),
              toString(collectives[byPosition[next]]));
          return failure();
        }
      return success();
    };
    auto send = [&](const Work &work) {
      int consumer = getConsumerStage(pipeline, work);
      if (consumer >= 0 && pipeline.getDevice(consumer) != device)
        instrs.push_back(Instr::send(work, pipeline.getDevice(consumer)));
    };
    const std::vector<char> *paired =
        size_t(device) < pairs.size() ? &pairs[device] : nullptr;
    for (int i = 0; i < int(order.size()); ++i) {
      const Work &work = order[i];
      issueUpTo(i);
      if (paired && size_t(i) < paired->size() && (*paired)[i]) {
        // An overlapped group (order[i] joined to the passes after it)
        // issues as one: every member's receives, the passes, then every
        // member's sends (no member may wait for another's result).
        int last = i;
        while (last < int(paired->size()) && (*paired)[last])
          ++last;
        if (last >= int(order.size()) || !collectives.empty()) {
          error = llvm::formatv(
              "device {0} overlaps {1} with {2}", device, toString(work),
              last >= int(order.size())
                  ? std::string("nothing (it is the last pass)")
                  : toString(order[i + 1]) +
                        ", but overlapped passes cannot run beside the "
                        "vocabulary shards' collectives");
          return failure();
        }
        for (int j = i; j <= last; ++j)
          if (failed(receive(order[j])))
            return failure();
        for (int j = i; j <= last; ++j) {
          instrs.push_back(Instr::exec(order[j]));
          instrs.back().paired = j < last;
        }
        for (int j = i; j <= last; ++j)
          send(order[j]);
        i = last;
        continue;
      }
      if (failed(receive(work)))
        return failure();
      instrs.push_back(Instr::exec(work));
      send(work);
    }
    issueUpTo(int(order.size()));
    return success();
  }

private:
  /// Where each collective goes on `device`: before order[issueAt[c]]
  /// (order.size(): at the end).
  ///  * vocabulary stream: as early as possible -- right after its local
  ///    contributions, and after the collective before it;
  ///  * blocking: where the device would meet the others -- before its
  ///    first pass that starts once every contribution has finished, but
  ///    after its own contributions.
  FailureOr<std::vector<int>> getIssuePositions(int device,
                                                llvm::ArrayRef<int> position,
                                                std::string &error) {
    const std::vector<Work> &order = orders[device];
    std::vector<int> issueAt(collectives.size());
    // Each shard's collectives form their own queue (stream and
    // communicator), so only those of one shard keep each other's order;
    // blocking collectives stop the device, so they all keep one order.
    int previousOf[2] = {0, 0};
    for (size_t c = 0; c < collectives.size(); ++c) {
      contributions.clear();
      getCollectiveContributions(pipeline, collectives[c], device,
                                 contributions);
      int at = 0;
      for (const Work &w : contributions) {
        if (position[index(w)] < 0) {
          error = llvm::formatv("device {0} never runs {1}, its part of {2}",
                                device, toString(w), toString(collectives[c]));
          return failure();
        }
        at = std::max(at, position[index(w)] + 1);
      }
      if (blocking) {
        double when = ready[cindex(collectives[c])];
        int first = int(order.size());
        for (int i = 0; i < int(order.size()); ++i)
          if (execution.start[index(order[i])] >= when) {
            first = i;
            break;
          }
        at = std::max(at, first);
      }
      int &previous = previousOf[blocking ? 0 : int(collectives[c].shard)];
      issueAt[c] = previous = std::max(at, previous);
    }
    return issueAt;
  }

  const Pipeline &pipeline;
  llvm::ArrayRef<std::vector<Work>> orders;
  llvm::ArrayRef<std::vector<char>> pairs;
  WorkIndex index;
  CollectiveIndex cindex;
  std::vector<CollectiveId> collectives;
  std::vector<double> ready;
  PassTimes execution;
  bool blocking;
  llvm::SmallVector<Work, 4> contributions;
  /// lowerDevice's table of positions (-1: not on the device).
  std::vector<int> position;
};
} // namespace

FailureOr<Program>
sched::lowerToProgram(const Pipeline &pipeline,
                      llvm::ArrayRef<std::vector<Work>> orders,
                      std::string &error,
                      llvm::ArrayRef<std::vector<char>> pairs) {
  ProgramLowering lowering(pipeline, orders, pairs);
  if (failed(lowering.orderCollectives(error)))
    return failure();
  Program program;
  program.devices.resize(pipeline.devices);
  for (int device = 0; device < pipeline.devices; ++device)
    if (failed(lowering.lowerDevice(device, program.devices[device], error)))
      return failure();
  return program;
}
