//===- Verifier.cpp - Check per-device programs ---------------------------===//

#include "sluice/Schedule/Verifier.h"
#include "sluice/Schedule/ProgramRunner.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {

/// Key of a message: the work whose result travels, and the receiver.
struct MessageKey {
  size_t work;
  int to;
  bool operator==(const MessageKey &o) const {
    return work == o.work && to == o.to;
  }
};
struct MessageKeyInfo {
  static MessageKey getEmptyKey() { return {~size_t(0), -1}; }
  static MessageKey getTombstoneKey() { return {~size_t(0) - 1, -1}; }
  static unsigned getHashValue(const MessageKey &k) {
    return llvm::hash_combine(k.work, k.to);
  }
  static bool isEqual(const MessageKey &a, const MessageKey &b) {
    return a == b;
  }
};

class ProgramVerifier {
public:
  ProgramVerifier(const Pipeline &pipeline, const Program &program)
      : pipeline(pipeline), program(program), index(pipeline) {}

  std::optional<Violation> run() {
    if (auto v = checkShapeAndUniqueness())
      return v;
    if (auto v = checkGroups())
      return v;
    if (auto v = checkMessages())
      return v;
    if (auto v = checkCollectives())
      return v;
    if (auto v = checkDependencies())
      return v;
    return checkDeadlock();
  }

private:
  const Work &workAt(InstrRef ref) const {
    return program.devices[ref.device][ref.index].work;
  }

  Violation violation(InstrRef at, std::string message) const {
    return Violation{std::move(message), at, std::nullopt, ""};
  }
  Violation violation(InstrRef at, std::string message, InstrRef related,
                      std::string relatedMessage) const {
    return Violation{std::move(message), at, related,
                     std::move(relatedMessage)};
  }

  bool inRange(const Work &work) const { return hasWork(pipeline, work); }

  bool inRange(const CollectiveId &id) const {
    return id.group >= 0 && id.group < pipeline.vocab.getNumGroups(id.shard) &&
           id.microbatch >= 0 && id.microbatch < pipeline.microbatches &&
           id.slice >= 0 && id.slice < pipeline.slices;
  }

  /// Every (pass, stage, microbatch, slice) exactly once, on its device.
  std::optional<Violation> checkShapeAndUniqueness() {
    if (int(program.devices.size()) != pipeline.devices)
      return violation({0, -1},
                       llvm::formatv("program has {0} devices, the pipeline "
                                     "{1}",
                                     program.devices.size(), pipeline.devices));
    execAt.assign(index.size(), InstrRef{-1, -1});
    for (int d = 0; d < pipeline.devices; ++d) {
      const auto &instrs = program.devices[d];
      for (int i = 0; i < int(instrs.size()); ++i) {
        const Instr &instr = instrs[i];
        if (instr.kind == InstrKind::Collective) {
          if (!inRange(instr.collective))
            return violation({d, i}, "issues " + toString(instr.collective) +
                                         ", which this pipeline does not have");
          continue;
        }
        if (!inRange(instr.work))
          return violation({d, i}, "names " + toString(instr.work) +
                                       ", which this pipeline does not have");
        if (instr.kind != InstrKind::Exec)
          continue;
        if (pipeline.getWorkDevice(instr.work) != d)
          return violation(
              {d, i}, llvm::formatv("runs {0} on device {1}, but "
                                    "stage {2} is on device {3}",
                                    toString(instr.work), d, instr.work.stage,
                                    pipeline.getWorkDevice(instr.work)));
        InstrRef &first = execAt[index(instr.work)];
        if (first.device >= 0)
          return violation({d, i}, "runs " + toString(instr.work) + " twice",
                           first, "first run here");
        first = {d, i};
      }
    }
    for (const Work &work : getAllWork(pipeline))
      if (execAt[index(work)].device < 0)
        return violation({pipeline.getWorkDevice(work), -1},
                         "never runs " + toString(work));
    return std::nullopt;
  }

  /// Overlapped groups (Instr::paired): consecutive passes, one forward
  /// beside the backward of one stage and microbatch -- B, B then its W,
  /// or BW -- of another microbatch (the backward of the forward's own
  /// microbatch would need its result), and no vocabulary collectives
  /// around (their issue positions assume one pass at a time).
  std::optional<Violation> checkGroups() {
    for (int d = 0; d < pipeline.devices; ++d) {
      const auto &instrs = program.devices[d];
      for (int i = 0; i < int(instrs.size()); ++i) {
        if (!instrs[i].paired)
          continue;
        if (instrs[i].kind != InstrKind::Exec)
          return violation({d, i}, "marks a message or collective "
                                   "overlapped: only passes pair");
        int first = i, last = i;
        while (last < int(instrs.size()) &&
               instrs[last].kind == InstrKind::Exec && instrs[last].paired)
          ++last;
        if (last >= int(instrs.size()) || instrs[last].kind != InstrKind::Exec)
          return violation({d, last - 1},
                           "pairs " + toString(instrs[last - 1].work) +
                               " with nothing: an overlapped pass must be "
                               "followed at once by the pass it runs beside");
        if (pipeline.vocab.any())
          return violation({d, first},
                           "overlaps " + toString(instrs[first].work) +
                               " with the passes after it, but overlapped "
                               "groups cannot run beside the vocabulary "
                               "shards' collectives");
        llvm::SmallVector<rt::GroupPass, 3> members;
        std::string text;
        for (int j = first; j <= last; ++j) {
          const Work &w = instrs[j].work;
          members.push_back({toPlanPass(w.kind), w.stage, w.microbatch,
                             w.slice});
          text += (j > first ? ", " : "") + toString(w);
        }
        std::string why =
            rt::checkOverlappedGroup(members.data(), members.size());
        if (!why.empty())
          return violation({d, first}, "overlaps " + text + ": " + why);
        i = last;
      }
    }
    return std::nullopt;
  }

  /// Every send has exactly one receive, and the other way round.
  std::optional<Violation> checkMessages() {
    for (int d = 0; d < pipeline.devices; ++d) {
      const auto &instrs = program.devices[d];
      for (int i = 0; i < int(instrs.size()); ++i) {
        const Instr &instr = instrs[i];
        if (instr.kind == InstrKind::Exec ||
            instr.kind == InstrKind::Collective)
          continue;
        if (instr.peer < 0 || instr.peer >= pipeline.devices || instr.peer == d)
          return violation({d, i}, llvm::formatv("peer {0} is not another "
                                                 "device",
                                                 instr.peer));
        bool isSend = instr.kind == InstrKind::Send;
        int producer = isSend ? d : instr.peer;
        if (pipeline.getWorkDevice(instr.work) != producer)
          return violation(
              {d, i},
              llvm::formatv("{0} {1}, which device {2} produces, not "
                            "device {3}",
                            isSend ? "sends" : "receives", toString(instr.work),
                            pipeline.getWorkDevice(instr.work), producer));
        MessageKey key{index(instr.work), isSend ? instr.peer : d};
        auto &table = isSend ? sends : recvs;
        auto [it, inserted] = table.try_emplace(key, InstrRef{d, i});
        if (!inserted)
          return violation({d, i},
                           llvm::formatv("{0} {1} a second time",
                                         isSend ? "sends" : "receives",
                                         toString(instr.work)),
                           it->second,
                           isSend ? "first sent here" : "first received here");
      }
    }
    for (auto &[key, ref] : sends)
      if (!recvs.count(key))
        return violation(ref,
                         llvm::formatv("sends {0} to device {1}, which never "
                                       "receives it",
                                       toString(workAt(ref)), key.to));
    for (auto &[key, ref] : recvs)
      if (!sends.count(key))
        return violation(
            ref, llvm::formatv("receives {0} from device {1}, "
                               "which never sends it",
                               toString(workAt(ref)),
                               program.devices[ref.device][ref.index].peer));
    return std::nullopt;
  }

  /// Every device issues every collective exactly once, all in the same
  /// order (a mismatch deadlocks MPI and NCCL), blocking exactly when the
  /// vocabulary layers are synchronous, and after its own contributions.
  std::optional<Violation> checkCollectives() {
    CollectiveIndex cindex(pipeline);
    std::vector<std::vector<InstrRef>> sequences(pipeline.devices);
    issuedAt.assign(pipeline.devices, std::vector<int>(cindex.size(), -1));
    llvm::SmallVector<Work, 4> contributions;
    for (int d = 0; d < pipeline.devices; ++d) {
      const auto &instrs = program.devices[d];
      for (int i = 0; i < int(instrs.size()); ++i) {
        const Instr &instr = instrs[i];
        if (instr.kind != InstrKind::Collective)
          continue;
        int &at = issuedAt[d][cindex(instr.collective)];
        if (at >= 0)
          return violation({d, i},
                           "issues " + toString(instr.collective) + " twice",
                           InstrRef{d, at}, "first issued here");
        at = i;
        if (instr.blocking != pipeline.vocab.synchronous)
          return violation(
              {d, i}, llvm::formatv("issues {0} {1}, but the vocabulary "
                                    "layers are {2}",
                                    toString(instr.collective),
                                    instr.blocking ? "blocking"
                                                   : "on the vocabulary stream",
                                    pipeline.vocab.synchronous
                                        ? "synchronous (interlaced)"
                                        : "asynchronous"));
        contributions.clear();
        getCollectiveContributions(pipeline, instr.collective, d,
                                   contributions);
        for (const Work &work : contributions) {
          InstrRef ran = execAt[index(work)];
          if (ran.index > i)
            return violation({d, i},
                             "issues " + toString(instr.collective) +
                                 " before " + toString(work) +
                                 ", whose result it carries",
                             ran, "which runs here");
        }
        sequences[d].push_back({d, i});
      }
      for (const CollectiveId &id : getCollectives(pipeline))
        if (issuedAt[d][cindex(id)] < 0)
          return violation({d, -1}, "never issues " + toString(id));
    }
    // Per shard: each has its own queue.
    for (ShardKind shard : {ShardKind::Input, ShardKind::Output}) {
      auto ofShard = [&](int d) {
        std::vector<InstrRef> refs;
        for (InstrRef ref : sequences[d])
          if (program.devices[d][ref.index].collective.shard == shard)
            refs.push_back(ref);
        return refs;
      };
      std::vector<InstrRef> first = ofShard(0);
      for (int d = 1; d < pipeline.devices; ++d) {
        std::vector<InstrRef> mine = ofShard(d);
        if (auto v = compareSequences(mine, first))
          return v;
      }
    }
    return std::nullopt;
  }

  /// The first place device `here[0].device` issues a shard's collectives
  /// in another order than device 0.
  std::optional<Violation> compareSequences(llvm::ArrayRef<InstrRef> refs,
                                            llvm::ArrayRef<InstrRef> first) {
    {
      for (size_t k = 0; k < refs.size() && k < first.size(); ++k) {
        InstrRef here = refs[k], there = first[k];
        int d = here.device;
        const CollectiveId &mine = program.devices[d][here.index].collective;
        const CollectiveId &theirs = program.devices[0][there.index].collective;
        if (mine != theirs)
          return violation(
              here,
              llvm::formatv("issues {0} as its collective number {1} of "
                            "that shard, but device 0 issues {2} there: "
                            "every device must issue a shard's collectives "
                            "in the same order",
                            toString(mine), k, toString(theirs)),
              there, "device 0's collective number " + std::to_string(k));
      }
    }
    return std::nullopt;
  }

  /// Each unit after its dependencies: on the same device, earlier in the
  /// list; from another device, through a receive earlier in the list and
  /// a send after the producer on the producing device.
  std::optional<Violation> checkDependencies() {
    llvm::SmallVector<Work, 4> deps;
    llvm::SmallVector<CollectiveId, 2> inputs;
    for (int d = 0; d < pipeline.devices; ++d) {
      const auto &instrs = program.devices[d];
      // Position of each local receive, by the work it carries.
      llvm::DenseMap<size_t, int> received;
      for (int i = 0; i < int(instrs.size()); ++i) {
        const Instr &instr = instrs[i];
        if (instr.kind == InstrKind::Recv) {
          received[index(instr.work)] = i;
          continue;
        }
        if (instr.kind == InstrKind::Collective)
          continue;
        if (instr.kind == InstrKind::Send) {
          InstrRef producer = execAt[index(instr.work)];
          if (producer.index > i)
            return violation(
                {d, i}, "sends " + toString(instr.work) + " before it has run",
                producer, "it runs here");
          continue;
        }
        deps.clear();
        getDependencies(pipeline, instr.work, deps);
        for (const Work &dep : deps) {
          InstrRef depAt = execAt[index(dep)];
          if (depAt.device == d) {
            if (depAt.index > i)
              return violation({d, i},
                               "runs " + toString(instr.work) + " before " +
                                   toString(dep),
                               depAt, "which runs here");
            continue;
          }
          auto it = received.find(index(dep));
          if (it == received.end())
            return violation({d, i},
                             llvm::formatv("runs {0} without first receiving "
                                           "{1} from device {2}",
                                           toString(instr.work), toString(dep),
                                           depAt.device),
                             depAt, "which runs here");
        }
        inputs.clear();
        getCollectiveInputs(pipeline, instr.work, inputs);
        CollectiveIndex cindex(pipeline);
        for (const CollectiveId &id : inputs) {
          int at = issuedAt[d][cindex(id)];
          if (at > i)
            return violation({d, i},
                             "runs " + toString(instr.work) +
                                 " before issuing " + toString(id) +
                                 ", whose result it reads",
                             InstrRef{d, at}, "which is issued here");
        }
      }
    }
    return std::nullopt;
  }

  /// Issues every device's instructions in order as the runtime does
  /// (ProgramRunner.h); devices that stop before their end are a deadlock.
  std::optional<Violation> checkDeadlock() {
    ProgramObserver nothing;
    ProgramRun run = runProgram(pipeline, program, nothing);
    for (int d = 0; d < pipeline.devices; ++d) {
      if (run.getNext(d) == program.devices[d].size())
        continue;
      InstrRef at{d, int(run.getNext(d))};
      const Instr &instr = program.devices[d][run.getNext(d)];
      auto stopped = [&](int device, StringRef where) {
        return run.getNext(device) < program.devices[device].size()
                   ? "device " + std::to_string(device) + where.str()
                   : "device " + std::to_string(device) + " stops here";
      };
      if (const std::optional<CollectiveId> &id = run.getWaitingFor(d)) {
        // Name a device that has not joined the collective.
        int absent = 0;
        for (int e = 0; e < pipeline.devices; ++e)
          if (!run.hasJoined(e, *id)) {
            absent = e;
            break;
          }
        return violation(
            at,
            llvm::formatv("deadlock: device {0} waits here for {1}, which "
                          "device {2} never issues",
                          d, toString(*id), absent),
            InstrRef{absent, int(run.getNext(absent))},
            stopped(absent, " is stuck here"));
      }
      InstrRef sender = sends.lookup({index(instr.work), d});
      return violation(
          at,
          llvm::formatv("deadlock: device {0} waits here for {1} from device "
                        "{2}, which is itself stuck",
                        d, toString(instr.work), sender.device),
          InstrRef{sender.device, int(run.getNext(sender.device))},
          stopped(sender.device, " waits here, before sending it"));
    }
    return std::nullopt;
  }

  const Pipeline &pipeline;
  const Program &program;
  WorkIndex index;
  std::vector<InstrRef> execAt;
  /// Per device, where each collective is issued (-1: not).
  std::vector<std::vector<int>> issuedAt;
  llvm::DenseMap<MessageKey, InstrRef, MessageKeyInfo> sends, recvs;
};

} // namespace

std::optional<Violation> sched::verifyProgram(const Pipeline &pipeline,
                                              const Program &program) {
  return ProgramVerifier(pipeline, program).run();
}
