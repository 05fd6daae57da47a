//===- Verifier.cpp - Check per-device programs ---------------------------===//

#include "sluice/Schedule/Verifier.h"

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
    if (auto v = checkMessages())
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

  bool inRange(const Work &work) const {
    return work.stage >= 0 && work.stage < pipeline.getNumStages() &&
           work.microbatch >= 0 && work.microbatch < pipeline.microbatches &&
           work.slice >= 0 && work.slice < pipeline.slices &&
           llvm::is_contained(getStagePasses(pipeline), work.kind);
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
        if (!inRange(instr.work))
          return violation({d, i}, "names " + toString(instr.work) +
                                       ", which this pipeline does not have");
        if (instr.kind != InstrKind::Exec)
          continue;
        if (pipeline.getDevice(instr.work.stage) != d)
          return violation(
              {d, i}, llvm::formatv("runs {0} on device {1}, but "
                                    "stage {2} is on device {3}",
                                    toString(instr.work), d, instr.work.stage,
                                    pipeline.getDevice(instr.work.stage)));
        InstrRef &first = execAt[index(instr.work)];
        if (first.device >= 0)
          return violation({d, i}, "runs " + toString(instr.work) + " twice",
                           first, "first run here");
        first = {d, i};
      }
    }
    for (int s = 0; s < pipeline.getNumStages(); ++s)
      for (PassKind kind : getStagePasses(pipeline))
        for (int mb = 0; mb < pipeline.microbatches; ++mb)
          for (int k = 0; k < pipeline.slices; ++k) {
            Work work{kind, s, mb, k};
            if (execAt[index(work)].device < 0)
              return violation({pipeline.getDevice(s), -1},
                               "never runs " + toString(work));
          }
    return std::nullopt;
  }

  /// Every send has exactly one receive, and the other way round.
  std::optional<Violation> checkMessages() {
    for (int d = 0; d < pipeline.devices; ++d) {
      const auto &instrs = program.devices[d];
      for (int i = 0; i < int(instrs.size()); ++i) {
        const Instr &instr = instrs[i];
        if (instr.kind == InstrKind::Exec)
          continue;
        if (instr.peer < 0 || instr.peer >= pipeline.devices || instr.peer == d)
          return violation({d, i}, llvm::formatv("peer {0} is not another "
                                                 "device",
                                                 instr.peer));
        bool isSend = instr.kind == InstrKind::Send;
        int producer = isSend ? d : instr.peer;
        if (pipeline.getDevice(instr.work.stage) != producer)
          return violation(
              {d, i},
              llvm::formatv("{0} {1}, which device {2} produces, not "
                            "device {3}",
                            isSend ? "sends" : "receives", toString(instr.work),
                            pipeline.getDevice(instr.work.stage), producer));
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

  /// Each unit after its dependencies: on the same device, earlier in the
  /// list; from another device, through a receive earlier in the list and
  /// a send after the producer on the producing device.
  std::optional<Violation> checkDependencies() {
    llvm::SmallVector<Work, 4> deps;
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
      }
    }
    return std::nullopt;
  }

  /// Issues every device's instructions in order; a receive blocks until
  /// its send has been issued. Stuck devices are a deadlock.
  std::optional<Violation> checkDeadlock() {
    int p = pipeline.devices;
    std::vector<int> next(p, 0);
    llvm::DenseMap<MessageKey, bool, MessageKeyInfo> issued;
    bool progress = true;
    while (progress) {
      progress = false;
      for (int d = 0; d < p; ++d) {
        const auto &instrs = program.devices[d];
        while (next[d] < int(instrs.size())) {
          const Instr &instr = instrs[next[d]];
          if (instr.kind == InstrKind::Recv &&
              !issued.count({index(instr.work), d}))
            break;
          if (instr.kind == InstrKind::Send)
            issued[{index(instr.work), instr.peer}] = true;
          ++next[d];
          progress = true;
        }
      }
    }
    for (int d = 0; d < p; ++d) {
      if (next[d] == int(program.devices[d].size()))
        continue;
      InstrRef at{d, next[d]};
      const Instr &instr = program.devices[d][next[d]];
      InstrRef sender = sends.lookup({index(instr.work), d});
      InstrRef blocker{sender.device, next[sender.device]};
      return violation(
          at,
          llvm::formatv("deadlock: device {0} waits here for {1} from device "
                        "{2}, which is itself stuck",
                        d, toString(instr.work), sender.device),
          blocker,
          blocker.index < int(program.devices[blocker.device].size())
              ? "device " + std::to_string(blocker.device) +
                    " waits here, before sending it"
              : "device " + std::to_string(blocker.device) + " stops here");
    }
    return std::nullopt;
  }

  const Pipeline &pipeline;
  const Program &program;
  WorkIndex index;
  std::vector<InstrRef> execAt;
  llvm::DenseMap<MessageKey, InstrRef, MessageKeyInfo> sends, recvs;
};

} // namespace

std::optional<Violation> sched::verifyProgram(const Pipeline &pipeline,
                                              const Program &program) {
  return ProgramVerifier(pipeline, program).run();
}
