//===- Settings.cpp - A session's options, checked and resolved -----------===//

#include "Settings.h"

#include "Checkpoint.h"
#include "Failure.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

namespace sluice::rt::session {

namespace {

/// Takes `flag`'s value into `field`, unless a resumed run recorded one
/// and the flag was not given; a flag that changes what the checkpoint
/// recorded is named in `changed`.
template <class T, class V>
void takeSetting(const Given<T> &flag, const char *name, V &field,
                 const V *recorded, std::vector<std::string> &changed) {
  field = V(flag.value);
  if (!recorded)
    return;
  if (!flag.given)
    field = *recorded;
  else if (field != *recorded)
    changed.push_back(name);
}

} // namespace

/// Everything about the flags that can be wrong before the plan is read,
/// checked the same way on every rank, so the job ends with one message.
void checkOptions(Communicator &world, const SessionOptions &o) {
  if (o.backend != "cpu" && o.backend != "cuda")
    failEverywhere(world, "unknown --backend '" + o.backend +
                              "' (expected cpu or cuda)");
  if (o.transport != "auto" && o.transport != "nccl" && o.transport != "mpi")
    failEverywhere(world, "unknown --transport '" + o.transport +
                              "' (expected auto, nccl or mpi)");
  if (o.commOrder != "auto" && o.commOrder != "global" && o.commOrder != "plan")
    failEverywhere(world, "unknown --comm-order '" + o.commOrder +
                              "' (expected auto, global or plan)");
  if (o.commOrder == "plan" && o.backend == "cuda")
    failEverywhere(world, "--comm-order plan is for studying orders on the "
                          "CPU backend (--backend cpu --transport nccl); the "
                          "cuda backend issues in the global order");
  if (o.threads < 0 || o.threads > 4096)
    failEverywhere(world, "--threads must be between 1 and 4096 (0: the "
                          "cores over the ranks on this host), got " +
                              std::to_string(o.threads));
  if (!(o.commTimeout > 0))
    failEverywhere(world, "--comm-timeout must be positive, got " +
                              std::to_string(o.commTimeout));
  if (!(o.slowAllToAllMs >= 0) || o.slowAllToAllMs > 1e6)
    failEverywhere(world, "--slow-all-to-all must be 0 to 1000000 "
                          "milliseconds, got " +
                              std::to_string(o.slowAllToAllMs));
  // 0: nothing to train -- evaluate or export the weights as loaded.
  if (o.steps < 0)
    failEverywhere(world, "--steps must not be negative, got " +
                              std::to_string(o.steps));
  if (!o.dumpGrads.empty() && !o.checkAgainst.empty())
    failEverywhere(world,
                   "--dump-grads and --check-against exclude each other");
  if (LearningRateSchedule::Decay d;
      !LearningRateSchedule::parseDecay(o.lrDecay.value, d))
    failEverywhere(world, "unknown --lr-decay '" + o.lrDecay.value +
                              "' (expected none, linear or cosine)");
  if (o.logEvery < 1)
    failEverywhere(world, "--log-every must be positive, got " +
                              std::to_string(o.logEvery));
  if (o.saveEvery < 0 || (o.saveEvery > 0 && o.saveDir.empty()))
    failEverywhere(world, "--save-every needs --save DIR and a positive "
                          "step count");
  if (o.evalEvery < 0 || o.evalSteps < 0)
    failEverywhere(world, "--eval-every and --eval-steps must not be "
                          "negative");
  if (o.evalEvery > 0 && o.dataPath.empty())
    failEverywhere(world, "--eval-every needs --data: synthetic tokens have "
                          "no held-out part");
  if (!(o.valFraction.value > 0 && o.valFraction.value < 1))
    failEverywhere(world, "--val-fraction must be between 0 and 1, got " +
                              std::to_string(o.valFraction.value));
  if (o.keepCheckpoints < 1)
    failEverywhere(world, "--keep-checkpoints must be at least 1, got " +
                              std::to_string(o.keepCheckpoints));
  if (o.loadStep >= 0 && o.loadDir.empty())
    failEverywhere(world, "--load-step needs --load DIR");
  if (!(o.peakTflops >= 0))
    failEverywhere(world, "--peak-tflops must not be negative");
  if (!o.loadHF.empty() && !o.loadDir.empty())
    failEverywhere(world, "--load-hf and --load exclude each other: a "
                          "checkpoint holds the weights already");
  if (std::string why = o.sampling.check(); !why.empty())
    failEverywhere(world, why);
  if (o.sampling.newTokens > 0 && o.prompt.empty() == o.promptIds.empty())
    failEverywhere(world, "--generate needs a prompt: --prompt TEXT (encoded "
                          "with --data's tokenizer) or --prompt-ids, one "
                          "of them");
  if (o.sampling.newTokens == 0 && (!o.prompt.empty() || !o.promptIds.empty()))
    failEverywhere(world, "--prompt and --prompt-ids need --generate N, the "
                          "tokens to draw");
  for (int32_t id : o.promptIds)
    if (id < 0)
      failEverywhere(world, "--prompt-ids must be token ids, got " +
                                std::to_string(id));
  if (o.profileSlices && o.profilePath.empty())
    failEverywhere(world, "--profile-slices needs --profile FILE");
  for (auto [flag, used] : {std::pair{"--trace", !o.tracePath.empty()},
                            std::pair{"--timing", o.timing},
                            std::pair{"--profile", !o.profilePath.empty()}})
    if (o.reference && used)
      failEverywhere(world, std::string(flag) +
                                " times the pipelined run's passes; "
                                "--reference runs none");
}

/// The run's optimizer settings and seed: each flag given, else what the
/// checkpoint being resumed recorded (so a resumed run continues the
/// interrupted one's schedule), else the flag's default.
TrainingSettings resolveSettings(HostGroup &world,
                                 const SessionOptions &o) {
  std::optional<TrainingSettings> saved;
  if (!o.loadDir.empty()) {
    CheckpointManifest manifest;
    agree(world, readCheckpointManifest(o.loadDir, o.loadStep, manifest));
    saved = manifest.settings;
  }
  const TrainingSettings *r = saved ? &*saved : nullptr;
  TrainingSettings t;
  std::vector<std::string> changed;
  takeSetting(o.learningRate, "--lr", t.schedule.peak,
              r ? &r->schedule.peak : nullptr, changed);
  takeSetting(o.weightDecay, "--weight-decay", t.adam.weightDecay,
              r ? &r->adam.weightDecay : nullptr, changed);
  takeSetting(o.warmupSteps, "--warmup-steps", t.schedule.warmup,
              r ? &r->schedule.warmup : nullptr, changed);
  takeSetting(o.minLearningRate, "--min-lr", t.schedule.minimum,
              r ? &r->schedule.minimum : nullptr, changed);
  takeSetting(o.clipGrad, "--clip-grad", t.clipNorm,
              r ? &r->clipNorm : nullptr, changed);
  takeSetting(o.seed, "--seed", t.seed, r ? &r->seed : nullptr, changed);
  LearningRateSchedule::parseDecay(o.lrDecay.value, t.schedule.decay);
  if (r && !o.lrDecay.given)
    t.schedule.decay = r->schedule.decay;
  else if (r && t.schedule.decay != r->schedule.decay)
    changed.push_back("--lr-decay");
  // The decay ends with the run's last step (--steps counts the whole
  // run's) unless told otherwise, or recorded.
  t.schedule.decaySteps = o.lrDecaySteps > 0 ? o.lrDecaySteps
                          : r              ? r->schedule.decaySteps
                                           : o.steps;
  if (r && o.lrDecaySteps > 0 && t.schedule.decaySteps != r->schedule.decaySteps)
    changed.push_back("--lr-decay-steps");
  // The held-out share decides which tokens train: kept from the
  // checkpoint unless validation is asked for again.
  t.heldOut = o.evalEvery > 0 ? o.valFraction.value : 0.0;
  if (r && o.evalEvery == 0 && !o.valFraction.given)
    t.heldOut = r->heldOut;
  else if (r && t.heldOut != r->heldOut)
    changed.push_back("--eval-every/--val-fraction (the held-out share " +
                      std::to_string(r->heldOut) + " -> " +
                      std::to_string(t.heldOut) +
                      ", so other tokens train)");
  if (r) { // constants no flag sets; the batch the checkpoint trained on
    t.tokensPerStep = r->tokensPerStep;
    t.adam.beta1 = r->adam.beta1;
    t.adam.beta2 = r->adam.beta2;
    t.adam.epsilon = r->adam.epsilon;
  }

  // Bounded by what the optimizer's fp32 holds: --lr 1e39 is infinity
  // there, and so NaN weights after the first update.
  if (!(t.adam.weightDecay >= 0) || !std::isfinite(t.adam.weightDecay))
    failEverywhere(world, "--weight-decay must be a finite, non-negative "
                          "number, got " +
                              std::to_string(t.adam.weightDecay));
  if (t.schedule.warmup < 0 || o.lrDecaySteps < 0)
    failEverywhere(world, "--warmup-steps and --lr-decay-steps must not be "
                          "negative");
  if (!(t.schedule.peak > 0) || !std::isfinite(t.schedule.peak))
    failEverywhere(world, "--lr must be a positive number an fp32 holds, "
                          "got " +
                              std::to_string(t.schedule.peak));
  if (!(t.schedule.minimum >= 0 && t.schedule.minimum <= t.schedule.peak))
    failEverywhere(world, "--min-lr must be between 0 and --lr (" +
                              std::to_string(t.schedule.peak) + "), got " +
                              std::to_string(t.schedule.minimum));
  if (!(t.clipNorm >= 0) || !std::isfinite(t.clipNorm))
    failEverywhere(world, "--clip-grad must be a finite, non-negative "
                          "number, got " +
                              std::to_string(t.clipNorm));
  if (world.rank() == 0 && !changed.empty()) {
    std::string list;
    for (const std::string &flag : changed)
      list += (list.empty() ? "" : ", ") + flag;
    std::fprintf(stderr,
                 "%s: note: %s override%s what checkpoint '%s' recorded\n",
                 o.programName.c_str(), list.c_str(), changed.size() == 1 ? "s" : "",
                 o.loadDir.c_str());
  }
  return t;
}

} // namespace sluice::rt::session
