//===- RunHeader.cpp - What a run says before its first step --------------===//

#include "RunHeader.h"

#include "Parameters.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace sluice::rt::session {

int64_t countModelParameters(const ModelConfig &model) {
  // Counted on the unsharded model: a vocabulary shard's padding rows and
  // a tensor-parallel slice are not the model's size.
  int64_t total = 0;
  for (const ParameterSpec &spec : getModelParameters(getWholeModel(model)))
    total += getWholeElements(spec);
  return total;
}

std::string formatCount(double count) {
  static const struct {
    double scale;
    const char *suffix;
  } units[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "k"}};
  char text[32];
  for (const auto &u : units)
    if (count >= u.scale) {
      double v = count / u.scale;
      std::snprintf(text, sizeof(text), v >= 100 ? "%.0f%s" : "%.3g%s", v,
                    u.suffix);
      return text;
    }
  std::snprintf(text, sizeof(text), "%.0f", count);
  return text;
}

namespace {

std::string describeMesh(const Plan &plan, bool reference) {
  std::ostringstream os;
  if (reference)
    return "unpartitioned (--reference), 1 rank";
  os << "pp " << plan.devices << " x tp " << plan.tp << " x dp " << plan.dp;
  if (plan.cp > 1)
    os << " x cp " << plan.cp;
  os << " (" << plan.getRanks() << " rank" << (plan.getRanks() == 1 ? "" : "s")
     << ")";
  if (plan.sequenceParallel)
    os << ", sequence parallel";
  if (plan.zero > 0)
    os << ", ZeRO-" << plan.zero;
  if (plan.ep > 1) {
    os << ", experts over " << plan.ep << " replicas";
    if (plan.expertCapacity > 0)
      os << " (capacity " << plan.expertCapacity << "x the balanced share)";
  }
  os << ", " << plan.schedule;
  return os.str();
}

std::string describeOptimizer(const TrainingSettings &t) {
  const LearningRateSchedule &lr = t.schedule;
  std::ostringstream os;
  os << "AdamW lr " << lr.peak;
  if (lr.warmup > 0)
    os << ", warmup " << lr.warmup;
  if (lr.decay != LearningRateSchedule::Decay::None)
    os << ", " << LearningRateSchedule::getDecayName(lr.decay) << " to "
       << lr.minimum << " at step " << lr.decaySteps;
  os << ", weight decay " << t.adam.weightDecay;
  if (t.clipNorm > 0)
    os << ", clip " << t.clipNorm;
  os << ", seed " << t.seed;
  return os.str();
}

} // namespace

std::string describeRun(const RunFacts &f) {
  const Plan &plan = *f.plan;
  const SessionOptions &o = *f.options;
  const ModelConfig &model = plan.model;
  int64_t tokensPerStep = plan.getTokensPerStep();
  std::ostringstream os;
  os << "model " << model.name << ": "
     << formatCount(double(countModelParameters(model))) << " parameters, "
     << plan.precision.getName() << "; " << describeMesh(plan, o.reference)
     << "; " << plan.microbatches * plan.dp << " microbatches of "
     << model.microBatch << " x " << model.seqLen << " tokens = "
     << formatCount(double(tokensPerStep)) << " tokens a step\n";
  if (f.threads > 0)
    os << "cpu: " << f.threads << (f.threads == 1 ? " thread" : " threads")
       << " a rank (its kernels and GEMMs; --threads)\n";
  int64_t first = f.done + 1, last = std::max(f.done, o.steps);
  if (last >= first) {
    double tokens = double(tokensPerStep) * double(last - first + 1);
    os << "training steps " << first << " to " << last << ": "
       << formatCount(tokens) << " tokens";
    if (f.trainTokens > 0) {
      char epochs[32];
      std::snprintf(epochs, sizeof(epochs), "%.2f",
                    tokens / double(f.trainTokens));
      os << ", " << epochs << " epochs of --data's "
         << formatCount(double(f.trainTokens)) << " training tokens";
    } else {
      os << " (synthetic)";
    }
    os << "; " << describeOptimizer(*f.settings) << "\n";
  }
  return os.str();
}

std::string describeResume(const RunFacts &f, std::string &warning) {
  const SessionOptions &o = *f.options;
  warning.clear();
  if (o.loadDir.empty())
    return "";
  char line[512];
  if (f.done >= o.steps) {
    std::snprintf(line, sizeof(line),
                  "resumed from %s at step %lld: nothing to train (--steps "
                  "%lld, the whole run's)\n",
                  o.loadDir.c_str(), (long long)f.done, (long long)o.steps);
    return line;
  }
  std::snprintf(line, sizeof(line),
                "resumed from %s at step %lld; training steps %lld to %lld "
                "(--steps counts the whole run's)\n",
                o.loadDir.c_str(), (long long)f.done, (long long)f.done + 1,
                (long long)o.steps);
  const LearningRateSchedule &lr = f.settings->schedule;
  if (lr.decay != LearningRateSchedule::Decay::None &&
      lr.decaySteps < o.steps) {
    char text[512];
    std::snprintf(
        text, sizeof(text),
        "%s: warning: the %s decay the checkpoint recorded ends at step "
        "%lld: steps %lld to %lld train at the floor learning rate %g "
        "(--lr-decay-steps %lld would decay over the whole run)\n",
        o.programName.c_str(), LearningRateSchedule::getDecayName(lr.decay),
        (long long)lr.decaySteps,
        (long long)std::max(lr.decaySteps, f.done) + 1, (long long)o.steps,
        double(lr.minimum), (long long)o.steps);
    warning = text;
  }
  return line;
}

} // namespace sluice::rt::session
