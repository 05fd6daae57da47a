//===- Format.cpp - The plan file's vocabulary and rules ------------------===//

#include "sluice/PlanFormat/Format.h"

namespace sluice::rt {

namespace {
constexpr const char *kPassNames[kNumPasses] = {"F",  "B", "W",  "BW", "S",
                                                "S2", "T", "IF", "IB"};
constexpr const char *kOpNames[kNumOps] = {"exec", "send", "recv",
                                           "collective", "grad_sync"};
constexpr const char *kRecomputeNames[] = {"none", "selective", "full"};
constexpr const char *kShardNames[] = {"input", "output"};
constexpr const char *kLayerKindNames[] = {"embedding", "transformer",
                                           "output"};
static_assert(std::size(kLayerKindNames) == int(LayerKind::Output) + 1);

/// The index of `name` in `names`, or -1.
template <size_t N>
int find(const char *const (&names)[N], std::string_view name) {
  for (size_t i = 0; i < N; ++i)
    if (name == names[i])
      return int(i);
  return -1;
}

template <size_t N> std::string join(const char *const (&names)[N]) {
  std::string list;
  for (size_t i = 0; i < N; ++i)
    list += (i ? ", " : "") + std::string(names[i]);
  return list;
}
} // namespace

Shard getPassShard(Pass pass) {
  if (!isShardPass(pass))
    return Shard::None;
  return pass == Pass::IF || pass == Pass::IB ? Shard::Input : Shard::Output;
}

const char *passName(Pass pass) { return kPassNames[int(pass)]; }

std::optional<Pass> parsePass(std::string_view name) {
  int i = find(kPassNames, name);
  return i < 0 ? std::nullopt : std::optional<Pass>(Pass(i));
}

std::string passNames() { return join(kPassNames); }

const char *opName(Op op) { return kOpNames[int(op)]; }

std::optional<Op> parseOp(std::string_view name) {
  int i = find(kOpNames, name);
  return i < 0 ? std::nullopt : std::optional<Op>(Op(i));
}

std::string opNames() { return join(kOpNames); }

const char *shardName(Shard shard) {
  return shard == Shard::None ? "none" : kShardNames[int(shard)];
}

std::optional<Shard> parseShard(std::string_view name) {
  int i = find(kShardNames, name);
  return i < 0 ? std::nullopt : std::optional<Shard>(Shard(i));
}

const char *recomputeName(Recompute recompute) {
  return kRecomputeNames[int(recompute)];
}

std::optional<Recompute> parseRecompute(std::string_view name) {
  int i = find(kRecomputeNames, name);
  return i < 0 ? std::nullopt : std::optional<Recompute>(Recompute(i));
}

const char *layerKindName(LayerKind kind) {
  return kLayerKindNames[int(kind)];
}

int getBarriers(int algorithm) { return algorithm == 0 ? 3 : 3 - algorithm; }

std::string checkOverlappedGroup(const GroupPass *group, size_t count) {
  const GroupPass *forward = nullptr;
  const GroupPass *backward[2] = {nullptr, nullptr};
  size_t backwards = 0;
  for (size_t i = 0; i < count; ++i) {
    if (group[i].pass == Pass::F && !forward)
      forward = &group[i];
    else if (backwards < 2)
      backward[backwards++] = &group[i];
    else
      ++backwards;
  }
  auto same = [](const GroupPass &a, const GroupPass &b) {
    return a.stage == b.stage && a.mb == b.mb && a.slice == b.slice;
  };
  bool shaped =
      forward && (backwards == 1 ? backward[0]->pass == Pass::B ||
                                       backward[0]->pass == Pass::BW
                  : backwards == 2
                      ? backward[0]->pass == Pass::B &&
                            backward[1]->pass == Pass::W &&
                            same(*backward[0], *backward[1])
                      : false);
  if (!shaped)
    return "a group is one F beside one backward (B, B then its W, or BW), "
           "not these " +
           std::to_string(count) + " passes";
  if (backward[0]->mb == forward->mb)
    return "pairs microbatch " + std::to_string(forward->mb) +
           "'s F with its own backward, which needs the F's result";
  return "";
}

int getNumShardPasses(Shard shard, int algorithm) {
  if (shard == Shard::Input)
    return 2;
  return algorithm == 0 ? 3 : 2;
}

int VocabularyShape::getNumGroups(Shard shard) const {
  if (shard == Shard::Input)
    return input ? 2 : 0;
  return output ? 1 + getBarriers(algorithm) : 0;
}

std::optional<CollectiveRef> getCollectiveInput(const VocabularyShape &shape,
                                                Pass pass, Shard execShard,
                                                int stage) {
  bool stagePass = execShard == Shard::None;
  switch (pass) {
  case Pass::F:
    // The first stage adds positions to the gathered embedding lookup.
    if (stagePass && shape.input && stage == 0)
      return CollectiveRef{Shard::Input, 0};
    break;
  case Pass::B:
  case Pass::BW:
    // §5.1: the last stage's backward needs the reduced input gradient,
    // which the last barrier delivers.
    if (stagePass && shape.output && stage == shape.lastStage)
      return CollectiveRef{Shard::Output, getBarriers(shape.algorithm)};
    break;
  case Pass::S:
    return CollectiveRef{Shard::Output, 0};
  case Pass::S2:
    return CollectiveRef{Shard::Output, 1};
  case Pass::T:
    return CollectiveRef{Shard::Output, shape.algorithm == 0 ? 2 : 1};
  case Pass::IB:
    return CollectiveRef{Shard::Input, 1};
  case Pass::W:
  case Pass::IF:
    break;
  }
  return std::nullopt;
}

std::optional<Contributor> getContributor(const VocabularyShape &shape,
                                          CollectiveRef ref) {
  if (ref.group < 0 || ref.group >= shape.getNumGroups(ref.shard))
    return std::nullopt;
  if (ref.shard == Shard::Input) {
    // Group 0 gathers every shard's lookup; group 1 scatters the first
    // stage's input gradient from its device.
    if (ref.group == 0)
      return Contributor{Pass::IF, Shard::Input, 0, -1};
    return Contributor{shape.splitBackward ? Pass::B : Pass::BW, Shard::None,
                       0, shape.inputRoot};
  }
  switch (ref.group) {
  case 0:
    // The broadcast of the last stage's output.
    return Contributor{Pass::F, Shard::None, shape.lastStage,
                       shape.outputRoot};
  case 1:
    return Contributor{Pass::S, Shard::Output, 0, -1};
  case 2:
    return Contributor{shape.algorithm == 0 ? Pass::S2 : Pass::T,
                       Shard::Output, 0, -1};
  default:
    return Contributor{Pass::T, Shard::Output, 0, -1};
  }
}

bool contributes(const VocabularyShape &shape, CollectiveRef ref, int device,
                 Pass pass, int stage, Shard execShard) {
  std::optional<Contributor> c = getContributor(shape, ref);
  if (!c || c->pass != pass || (c->device >= 0 && c->device != device))
    return false;
  if (c->shard != Shard::None)
    return execShard == c->shard;
  return execShard == Shard::None && stage == c->stage;
}

} // namespace sluice::rt
