//===- Reports.cpp - What a session reports after its steps ---------------===//

#include "Reports.h"

#include "Checkpoint.h"
#include "Failure.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace sluice::rt::session {

namespace {

/// This rank's measured pass times (and with `slices`, each stage timed
/// over a grid of slice lengths), as the profile's "stages" object.
std::string profileJson(Executor &executor, const Plan &plan,
                        Communicator &comm, bool slices) {
  nlohmann::json stages = nlohmann::json::object();
  // One rank at a time, so that ranks sharing a machine do not slow each
  // other's timings down.
  for (int rank = 0; slices && rank < comm.size(); ++rank) {
    std::map<std::string, std::vector<Executor::SliceSample>> calibration;
    if (rank == comm.rank())
      if (Status st = executor.calibrateSlices(5, calibration); !st)
        failHere(st.message());
    if (rank == comm.rank())
      for (const auto &[stage, samples] : calibration) {
        nlohmann::json &list = stages[stage]["slice_samples"];
        list = nlohmann::json::array();
        for (const Executor::SliceSample &s : samples)
          list.push_back({s.tokens, s.context, s.seconds});
      }
    comm.barrier();
  }
  for (const auto &[key, p] : executor.getProfile()) {
    nlohmann::json &entry = stages[key.first][key.second];
    entry["seconds_per_token"] = p.tokens ? p.seconds / double(p.tokens) : 0;
    entry["runs"] = p.runs;
  }
  // How many layers each stage held: a profile only costs the same cut.
  for (const StagePlan &stage : plan.stages)
    if (stages.contains(stage.name))
      stages[stage.name]["layers"] = stage.layers.size();
  return nlohmann::json{{"stages", stages},
                        {"device", comm.rank()},
                        {"optimizer_seconds", executor.getOptimizerSeconds()}}
      .dump();
}

} // namespace

std::string judgeRun(HostGroup &world, const RunResult &run,
                     const SessionOptions &o) {
  std::vector<std::string> reports;
  std::ostringstream mine;
  mine.precision(3);
  mine << std::scientific << run.worstGrad << " " << run.worstName;
  // Over the world: every replica's gradients are judged.
  if (Status st = world.gatherToRoot(mine.str(), reports); !st)
    failHere(st.message());
  if (world.rank() != 0)
    return "";
  double gradWorst = 0;
  std::string gradName;
  for (const std::string &r : reports) {
    std::istringstream in(r);
    double value;
    std::string name;
    in >> value >> name;
    if (value >= gradWorst) {
      gradWorst = value;
      gradName = name;
    }
  }
  // Step by step: the losses, and the gradient norms the clipping reads.
  auto worstOver = [](const std::string &path,
                      const std::vector<double> &actual, size_t &compared) {
    std::ifstream in(path);
    std::vector<double> expected;
    for (double v; in >> v;)
      expected.push_back(v);
    double worst = 0;
    compared = std::min(expected.size(), actual.size());
    for (size_t k = 0; k < compared; ++k)
      worst = std::max(worst, std::fabs(actual[k] - expected[k]) /
                                  std::max(std::fabs(expected[k]), 1e-30));
    return worst;
  };
  size_t compared = 0, normsCompared = 0;
  double lossWorst =
      worstOver(o.checkAgainst + "/losses.txt", run.losses, compared);
  double normWorst = worstOver(o.checkAgainst + "/grad-norms.txt", run.gradNorms,
                               normsCompared);
  double normTolerance = std::max(o.lossTolerance, o.gradTolerance);
  if (o.measureOnly) {
    // A band being measured: the figures, and no verdict.
    std::printf("measure against %s: loss max relative error %.2e over %zu "
                "steps; gradient norm max relative error %.2e; gradients "
                "max relative error %.2e in %s (measured, not judged)\n",
                o.checkAgainst.c_str(), lossWorst, compared, normWorst,
                gradWorst, gradName.c_str());
    std::fflush(stdout);
    return compared == 0
               ? "'" + o.checkAgainst + "' has no losses to compare with"
               : "";
  }
  std::printf("check against %s: loss max relative error %.2e over %zu "
              "steps (tolerance %.0e); gradient norm max relative error "
              "%.2e (tolerance %.0e); gradients max relative error %.2e in %s "
              "(tolerance %.0e)\n",
              o.checkAgainst.c_str(), lossWorst, compared, o.lossTolerance,
              normWorst, normTolerance, gradWorst, gradName.c_str(),
              o.gradTolerance);
  std::fflush(stdout);
  if (compared == 0)
    return "'" + o.checkAgainst + "' has no losses to compare with";
  // The norms are held to the looser of the two tolerances: a norm is no
  // closer than the gradients it sums, and as a trajectory it drifts
  // further than the loss (Adam's update of a near-zero gradient turns a
  // last-bit difference into one of the learning rate). The H100 suite
  // of 2026-11-26 measured 2e-5 on tiny-train p 2 with token slices in
  // fp32 (losses within 6e-7, gradients 1e-6); the demo's sharded
  // vocabulary 8e-4 over 20 steps (losses 4e-5).
  if (lossWorst > o.lossTolerance || gradWorst > o.gradTolerance ||
      normWorst > normTolerance) {
    return "the run differs from '" + o.checkAgainst +
           "' beyond tolerance";
  }
  return "";
}

void writeProfile(Communicator &comm, Executor &executor, const Plan &plan,
                  const SessionOptions &o, bool root) {
  std::vector<std::string> parts;
  if (Status st = comm.gatherToRoot(profileJson(executor, plan, comm, o.profileSlices), parts);
      !st)
    failHere(st.message());
  if (!root)
    return;
  nlohmann::json profile;
  profile["format"] = "sluice-profile";
  profile["version"] = 1;
  profile["schedule"] = plan.schedule;
  // What one rank timed: a shard of tp (calibrations price that shard).
  profile["tensor_parallel"] = plan.tp;
  profile["stages"] = nlohmann::json::object();
  // Each pipeline device's optimizer step (a rank of this pipeline each).
  nlohmann::json &optimizer = profile["optimizer_seconds"] =
      nlohmann::json::object();
  for (const std::string &part : parts) {
    nlohmann::json rank = nlohmann::json::parse(part);
    for (auto &[stage, passes] : rank["stages"].items())
      profile["stages"][stage] = passes;
    std::string device = std::to_string(rank["device"].get<int>());
    double seconds = rank["optimizer_seconds"].get<double>();
    if (!optimizer.contains(device) ||
        optimizer[device].get<double>() < seconds)
      optimizer[device] = seconds;
  }
  if (Status st = writeFileAtomically(o.profilePath, profile.dump(2) + "\n"); !st)
    failHere(st.message());
}

void writeTrace(Communicator &comm, Executor &executor,
                const std::string &path, bool root) {
  // One track per stream the profiler names (Profiler.cpp getTrace).
  static const char *const tracks[] = {"compute", "vocabulary",
                                       "data-parallel sums",
                                       "compute, lane 1"};
  auto trackOf = [](const std::string &stream) {
    if (stream == "compute")
      return 0;
    if (stream == "vocabulary")
      return 1;
    if (stream == "compute, lane 1")
      return 3;
    return 2;
  };
  nlohmann::json events = nlohmann::json::array();
  for (const TraceSpan &span : executor.getTrace())
    events.push_back({{"name", span.name},
                      {"ph", "X"},
                      {"pid", comm.rank()},
                      {"tid", trackOf(span.stream)},
                      {"ts", span.start * 1e6},
                      {"dur", (span.end - span.start) * 1e6}});
  std::vector<std::string> parts;
  if (Status st = comm.gatherToRoot(events.dump(), parts); !st)
    failHere(st.message());
  if (!root)
    return;
  nlohmann::json trace;
  trace["displayTimeUnit"] = "ms";
  nlohmann::json &all = trace["traceEvents"] = nlohmann::json::array();
  for (size_t rank = 0; rank < parts.size(); ++rank) {
    all.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", rank},
                   {"args", {{"name", "rank " + std::to_string(rank)}}}});
    for (int tid = 0; tid < 4; ++tid)
      all.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", rank},
                     {"tid", tid},
                     {"args", {{"name", tracks[tid]}}}});
    for (auto &event : nlohmann::json::parse(parts[rank]))
      all.push_back(event);
  }
  if (Status st = writeFileAtomically(path, trace.dump() + "\n"); !st)
    failHere(st.message());
}

void printTiming(Communicator &comm, Executor &executor) {
  const StepTimes &t = executor.getTimes();
  std::ostringstream line;
  line.precision(4);
  line << std::fixed << "rank " << comm.rank() << ": step " << t.total
       << " s, compute " << t.compute << " s, communication wait " << t.commWait
       << " s, data " << t.data << " s, executor overhead " << t.overhead()
       << " s (" << 100.0 * t.overhead() / t.total << "%)";
  if (t.vocabCollectives > 0)
    line << ", vocabulary collectives " << t.vocabCollectives << " s ("
         << 100.0 * t.vocabOverlapped / t.vocabCollectives
         << "% beside passes)";
  if (t.gradSyncs > 0)
    line << ", gradient sums " << t.gradSyncs << " s ("
         << 100.0 * t.gradSyncsOverlapped / t.gradSyncs
         << "% beside passes)";
  std::vector<std::string> lines;
  if (Status st = comm.gatherToRoot(line.str(), lines); !st)
    failHere(st.message());
  for (const std::string &l : lines)
    std::printf("%s\n", l.c_str());
}
} // namespace sluice::rt::session
