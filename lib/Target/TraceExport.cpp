//===- TraceExport.cpp - Chrome trace-event JSON --------------------------===//

#include "sluice/Target/Export.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::sluice;

llvm::json::Value mlir::sluice::getChromeTrace(
    const sched::Pipeline &pipeline, const Simulation &simulation,
    llvm::ArrayRef<std::string> stageNames, double microsecondsPerUnit) {
  llvm::json::Array events;
  auto meta = [&](llvm::StringRef what, int pid, int tid,
                  const std::string &name) {
    llvm::json::Object event{{"name", what},
                             {"ph", "M"},
                             {"pid", pid},
                             {"args", llvm::json::Object{{"name", name}}}};
    if (tid >= 0)
      event["tid"] = tid;
    events.push_back(std::move(event));
  };
  for (int d = 0; d < pipeline.devices; ++d) {
    meta("process_name", d, -1, "device " + std::to_string(d));
    meta("process_sort_index", d, -1, std::to_string(d));
    meta("thread_name", d, int(StreamKind::compute), "compute");
    meta("thread_name", d, int(StreamKind::comm), "comm");
    if (pipeline.vocab.any())
      meta("thread_name", d, int(StreamKind::vocab), "vocab");
  }
  bool replicas = false;
  for (const TimelineEvent &e : simulation.events)
    replicas |= e.kind == sched::InstrKind::GradSync;
  if (replicas)
    for (int d = 0; d < pipeline.devices; ++d)
      meta("thread_name", d, int(StreamKind::data), "data-parallel");
  // One span ("X" event) of `e` on its device's stream.
  auto span = [&](const TimelineEvent &e, std::string name,
                  std::string category, llvm::json::Object args) {
    llvm::json::Object event{
        {"name", std::move(name)},
        {"cat", std::move(category)},
        {"ph", "X"},
        {"pid", e.device},
        {"tid", int(e.stream)},
        {"ts", e.start * microsecondsPerUnit},
        {"dur", (e.end - e.start) * microsecondsPerUnit},
    };
    if (!args.empty())
      event["args"] = std::move(args);
    events.push_back(std::move(event));
  };
  for (const TimelineEvent &e : simulation.events) {
    const sched::Work &w = e.work;
    if (e.kind == sched::InstrKind::Collective) {
      const sched::CollectiveId &c = e.collective;
      llvm::StringRef shard =
          c.shard == sched::ShardKind::Input ? "input" : "output";
      std::string name = llvm::formatv("{0} shard collective {1} mb{2}", shard,
                                       c.group, c.microbatch)
                             .str();
      if (pipeline.slices > 1)
        name += ".s" + std::to_string(c.slice);
      span(e, name, "collective",
           llvm::json::Object{{"shard", shard},
                              {"group", c.group},
                              {"microbatch", c.microbatch},
                              {"slice", c.slice}});
      continue;
    }
    // A vocabulary pass runs the device's shard, not a stage.
    std::string where = sched::isVocabPass(w.kind)
                            ? "vocab" + std::to_string(w.stage)
                            : stageNames[w.stage];
    if (e.kind == sched::InstrKind::GradSync) {
      span(e, "gradient all-reduce " + where, "grad_sync", {});
      continue;
    }
    std::string name =
        e.kind == sched::InstrKind::Exec
            ? llvm::formatv("{0} {1} mb{2}", stringifyPassKind(w.kind), where,
                            w.microbatch)
                  .str()
            : llvm::formatv("send {0} {1} mb{2} -> {3}",
                            stringifyPassKind(w.kind), where, w.microbatch,
                            e.peer)
                  .str();
    if (pipeline.slices > 1)
      name += ".s" + std::to_string(w.slice);
    span(e, name,
         e.kind == sched::InstrKind::Exec ? stringifyPassKind(w.kind).str()
                                          : std::string("comm"),
         llvm::json::Object{{"stage", where},
                            {"microbatch", w.microbatch},
                            {"slice", w.slice}});
  }
  // Activation memory as one counter track per device.
  for (const MemorySample &sample : simulation.memory)
    events.push_back(llvm::json::Object{
        {"name", "activation memory"},
        {"ph", "C"},
        {"pid", sample.device},
        {"ts", sample.time * microsecondsPerUnit},
        {"args", llvm::json::Object{{"bytes", sample.bytes}}},
    });
  return llvm::json::Object{{"traceEvents", std::move(events)},
                            {"displayTimeUnit", "ms"}};
}
