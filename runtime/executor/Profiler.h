//===- Profiler.h - Where a rank's step went --------------------*- C++ -*-===//
//
// Device events around every pass and data-parallel sum of a program,
// read once a step is done into the step's split (StepTimes), its
// timeline (sluice-run --trace) and the per-pass profile accumulated over
// steps (sluice-run --profile).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXECUTOR_PROFILER_H
#define SLUICE_RUNTIME_EXECUTOR_PROFILER_H

#include "Trainer.h"
#include "Vocab.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sluice::rt {

class PassProfiler {
public:
  PassProfiler(const Plan &plan, int deviceIndex, Device &device)
      : plan(plan), deviceIndex(deviceIndex), device(device) {}

  /// Events for every exec instruction, and for every grad_sync one when
  /// `dataParallel`.
  void createEvents(bool dataParallel);
  /// Marks the step's beginning on `compute`.
  void beginStep(Stream &compute) { stepBegin->record(compute); }
  /// The events around instruction `instruction` (null where it has none).
  Event *getStart(size_t instruction) { return passStart[instruction].get(); }
  Event *getEnd(size_t instruction) { return passEnd[instruction].get(); }
  /// Whether pass `instruction` waited for a transfer or collective (its
  /// device's idle time before it is communication, not dispatch).
  void setWaited(size_t instruction, bool w) { waited[instruction] = w; }

  /// Reads the step's events into `times` (compute, the collectives and
  /// sums and their overlap), the spans and the profile; `shards` gives
  /// the vocabulary collectives' spans. Returns the device's idle time
  /// before each pass that waited for nothing: the host had not enqueued
  /// it yet (dispatch; the first one's also fetching the step's data).
  double account(StepTimes &times, VocabularyShards *shards);

  std::vector<TraceSpan> getTrace() const;
  std::map<std::pair<std::string, std::string>, PassProfile>
  getProfile() const;

private:
  /// Index into `profile` of a pass of a stage (or of a shard: stage -1).
  size_t profileIndex(int stage, Shard shard, Pass pass) const;

  const Plan &plan;
  int deviceIndex;
  Device &device;
  /// Per exec instruction, events around its pass, and per grad_sync
  /// instruction around its sums on the data stream (null for others).
  std::vector<std::unique_ptr<Event>> passStart, passEnd;
  /// On the compute stream when the step begins.
  std::unique_ptr<Event> stepBegin;
  std::vector<char> waited;
  /// The last step's passes (by instruction) and collectives, in seconds
  /// after `stepBegin`; named only when getTrace() asks.
  struct PassSpan {
    size_t instruction;
    double start, end;
  };
  std::vector<PassSpan> passSpans, syncSpans;
  std::vector<VocabularyShards::Span> collectiveSpans;
  /// Per (stage or shard, pass), accumulated over the steps.
  std::vector<PassProfile> profile;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_PROFILER_H
