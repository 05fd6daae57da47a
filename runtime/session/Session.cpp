//===- Session.cpp - A training session on one rank -----------------------===//

#include "Session.h"
#include "Generate.h"
#include "Tokens.h"

#include "CommOrder.h"
#include "Failure.h"
#include "Gradients.h"
#include "HfTokenizer.h"
#include "HuggingFace.h"
#include "Interrupt.h"
#include "Progress.h"
#include "RankBackend.h"
#include "Reports.h"
#include "ExpertBias.h"
#include "ExpertLoad.h"
#include "RunHeader.h"
#include "Settings.h"


#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace sluice::rt {

using namespace session;

namespace {
/// Whether the ranks issue their communication in the one global order
/// (CommOrder.h) rather than each device's plan order. NCCL needs it. Over
/// MPI, which matches messages by tag, it costs time: that order lists a
/// send where the zero-time run saw it complete, after the passes its
/// device ran meanwhile, so a device's first forwards all ran before it
/// sent the first (on 2 CPU ranks, a ZB-H2 step 0.28 s instead of 0.22).
/// So `auto` takes the plan's order over MPI, unless the plan has
/// vocabulary collectives (an MPI collective must be issued in one order
/// by its whole group, as NCCL's are).
bool usesGlobalOrder(const Plan &plan, const SessionOptions &options) {
  if (options.commOrder != "auto")
    return options.commOrder == "global";
  bool mpi = options.backend == "cpu" && options.transport != "nccl";
  if (!mpi)
    return true;
  for (const DeviceProgram &program : plan.programs)
    for (const Instruction &instr : program.instructions)
      if (instr.op == Op::Collective)
        return true;
  return false;
}
} // namespace

Session::Session(const SessionOptions &options, HostGroup &world)
    : options(options), world(world), root(world.rank() == 0),
      backend(std::make_unique<RankBackend>()) {
  session::setFailureRank(world.rank());
}

Session::~Session() = default;

Device &Session::getDevice() { return *backend->device; }

void Session::abortJob(int code) {
  if (backend->comm)
    backend->comm->abort(code);
  // The job's process group ends every process (MPI_Abort over MPI).
  static_cast<ProcessGroup &>(world).abort(code);
  std::abort(); // abort() came back: nothing else can stop the job
}
Communicator &Session::comm() { return *backend->comm; }

Outcome Session::open(const SessionOptions &options, HostGroup &world,
                      std::unique_ptr<Session> &out) {
  out.reset(new Session(options, world));
  try {
    out->openAll();
  } catch (const SessionEnd &end) {
    return end.outcome;
  }
  return Outcome::ok();
}

void Session::openAll() {
  checkOptions(world, options);
  loadJobPlan();
  openBackend(world, plan, options, *backend);
  settings = resolveSettings(world, options);
  noteBatchChange();
  tokens = session::openRunTokens(world, options, plan, settings,
                                  backend->replica);
  makeTrainer();
  loadWeights();
}

void Session::noteBatchChange() {
  int64_t now = plan.getTokensPerStep();
  int64_t recorded = settings.tokensPerStep;
  settings.tokensPerStep = now; // what this run's checkpoints record
  if (!root || recorded <= 0 || recorded == now)
    return;
  std::fprintf(stderr,
               "%s: note: checkpoint '%s' trained on %lld tokens a step, "
               "plan '%s' takes %lld: its steps from here see %s tokens "
               "(the learning-rate schedule and --steps count steps)\n",
               options.programName.c_str(), options.loadDir.c_str(),
               (long long)recorded, options.planPath.c_str(), (long long)now,
               now > recorded ? "more" : "fewer");
}

void Session::printHeader() {
  if (!root)
    return;
  session::RunFacts facts;
  facts.plan = &plan;
  facts.options = &options;
  facts.settings = &settings;
  facts.done = done;
  facts.trainTokens = tokens.trainTokens;
  facts.threads = backend->threads;
  std::string warning;
  std::string resume = session::describeResume(facts, warning);
  std::fputs(session::describeRun(facts).c_str(), stdout);
  std::fputs(resume.c_str(), stdout);
  std::fflush(stdout);
  std::fputs(warning.c_str(), stderr);
}

/// Reads the plan and checks it against this job: the rank count, the
/// transport's tag limit, and the precision asked for.
void Session::loadJobPlan() {
  const std::string &path = options.planPath;
  agree(world, loadPlan(path, plan));
  if (options.reference && world.size() != 1)
    failEverywhere(world, "--reference runs in one process; start it without "
                          "mpirun (got " +
                              std::to_string(world.size()) + " ranks)");
  if (!options.reference && plan.getRanks() != world.size())
    failEverywhere(world,
                   "plan '" + path + "' is for " +
                       (plan.getRanks() == plan.devices
                            ? std::to_string(plan.devices) + " devices"
                            : std::to_string(plan.getRanks()) + " ranks (pp " +
                                  std::to_string(plan.devices) + " x tp " +
                                  std::to_string(plan.tp) + " x dp " +
                                  std::to_string(plan.dp) +
                                  (plan.cp > 1 ? " x cp " +
                                                     std::to_string(plan.cp)
                                               : "") +
                                  ")") +
                       ", but " + std::to_string(world.size()) +
                       (world.size() == 1 ? " rank was" : " ranks were") +
                       " started: start it with sluice-launch -np " +
                       std::to_string(plan.getRanks()) + " " +
                       options.programName +
                       (world.size() == 1
                            ? " ..., or give --reference to run the whole "
                              "model in this one process"
                            : " ..."));
  for (const DeviceProgram &program : plan.programs)
    for (const Instruction &instr : program.instructions)
      if (instr.op != Op::Exec && instr.key > world.maxTag())
        failEverywhere(world, "message key " + std::to_string(instr.key) +
                                  " exceeds the MPI tag limit " +
                                  std::to_string(world.maxTag()));
  if (!options.reference && usesGlobalOrder(plan, options)) {
    if (Status st = applyCommunicationOrder(plan); !st)
      failEverywhere(world, "plan '" + path + "': " + st.message());
    // What the order guarantees, checked (cheap beside a step).
    if (Status st = checkSerializedOrder(plan); !st)
      failEverywhere(world, "plan '" + path +
                                "': internal error in the communication "
                                "order: " +
                                st.message());
  }
  if (!options.precision.empty()) {
    Precision run;
    if (!Precision::parse(options.precision, run))
      failEverywhere(world, "unknown --precision '" + options.precision +
                                "' (expected bf16, fp8 or fp32)");
    if (Status st = plan.setPrecision(run); !st)
      failEverywhere(world, st.message());
  }
}

void Session::makeTrainer() {
  TrainerOptions t;
  t.seed = settings.seed;
  t.adam = settings.adam;
  t.schedule = settings.schedule;
  if (world.rank() == options.failRank) {
    t.failAtInstruction = options.failAtInstruction;
    t.failHang = options.failHang;
  }
  t.wholeGradients = !options.dumpGrads.empty() || !options.checkAgainst.empty();
  t.commTimeout = options.commTimeout;
  // A profile times each pass on its own: interleaved, a pass's span
  // would hold the other's compute too.
  t.overlapGroups = options.overlapGroups && options.profilePath.empty();
  t.allToAllDelay = options.slowAllToAllMs / 1000.0;
  Device &device = *backend->device;
  if (options.reference) {
    trainer = std::make_unique<ReferenceTrainer>(
        plan.model, plan.microbatches * plan.dp, plan.precision, device,
        *tokens.data, t);
  } else {
    auto e = std::make_unique<Executor>(plan, comm().rank(), device, comm(),
                                        *tokens.data, t, backend->replicas,
                                        backend->shards, backend->experts,
                                        backend->expertReplicas,
                                        backend->contexts);
    executor = e.get();
    executor->setTimeOptimizer(!options.profilePath.empty());
    trainer = std::move(e);
  }
  if (Status st = trainer->prepare(); !st)
    failHere(st.message());
}

void Session::loadWeights() {
  // Under ZeRO a replica starts with its part of the moments only (and
  // ZeRO-3 of the weights): whole while they are loaded, as for a
  // checkpoint's writing, sharded again below.
  if (!options.loadHF.empty() || !options.loadDir.empty())
    agree(world, trainer->gatherOptimizerState());
  // Each rank loads its own parts: one that fails ends them all.
  if (!options.loadHF.empty())
    agree(world, loadHuggingFace(options.loadHF, plan.model,
                                 trainer->getParameters()));
  if (!options.loadDir.empty())
    agree(world, loadCheckpoint(options.loadDir, options.loadStep,
                                trainer->getParameters(), done));
  // ZeRO: from here on each replica keeps its part of the moments.
  if (Status st = trainer->shardOptimizerState(); !st)
    failHere(st.message());
}

Outcome Session::train() {
  // From the first step on (a signal while the weights load still ends
  // the run at once: there is nothing to save yet).
  if (options.stopOnSignal)
    session::installInterruptHandlers(root, !options.saveDir.empty());
  try {
    printHeader();
    runSteps();
    if (stopSignal) {
      // Saved, and nothing else: the run's end-of-run reports would
      // describe a run that did not end.
      saveStopped();
      return Outcome::ok();
    }
    writeDumps();
    std::string verdict;
    if (!options.checkAgainst.empty())
      verdict = judgeRun(world, result, options);
    if (!options.saveDir.empty())
      saveCheckpointNow(done);
    noteUntrainedOutputs();
    if (!options.saveHF.empty())
      saveHuggingFaceNow(done);
    if (options.sampling.newTokens > 0)
      session::generateSample(
          world,
          {*trainer, executor ? nullptr
                              : static_cast<ReferenceTrainer *>(trainer.get()),
           writesWeights(), backend->model ? backend->model.get() : &comm(),
           done, settings.seed, getWrittenParameters()},
          plan, options, tokens.tokenizer);
    if (executor && !options.profilePath.empty())
      writeProfile(comm(), *executor, plan, options, root);
    if (executor && !options.tracePath.empty())
      writeTrace(comm(), *executor, options.tracePath, root);
    if (executor && options.timing)
      printTiming(comm(), *executor);
    // Rank 0 judged: every rank ends alike.
    double failed = verdict.empty() ? 0 : 1;
    if (Status st = world.allReduceMax(&failed, 1); !st)
      failHere(st.message());
    if (failed > 0)
      return Outcome::everywhere(verdict);
  } catch (const SessionEnd &end) {
    return end.outcome;
  }
  return Outcome::ok();
}

/// Runs the steps after those the weights have taken: each step, then
/// checkpoints every --save-every steps but the last.
void Session::runSteps() {
  ProgressLog progress;
  if (root) {
    ProgressLog::Setup setup;
    setup.firstStep = done;
    setup.lastStep = std::max(done, options.steps);
    setup.logEvery = options.logEvery;
    double sequences = double(plan.getSequencesPerStep());
    setup.tokensPerStep = double(plan.getTokensPerStep());
    setup.flopsPerStep = sequences * getTrainingFlopsPerSequence(plan.model);
    double peak = options.peakTflops > 0
                      ? options.peakTflops * 1e12
                      : getKnownPeakFlops(backend->device->describe(),
                                          plan.precision.getName());
    setup.peakFlops = peak * double(options.reference ? 1 : plan.getRanks());
    setup.metricsPath = options.metricsPath;
    if (Status st = progress.open(setup); !st)
      failHere(st.message());
  }
  // --steps counts the whole training run's steps, as Megatron-LM's
  // --train-iters and nanoGPT's max_iters do: a resumed run trains those
  // its checkpoint has not taken.
  int64_t toTrain = std::max<int64_t>(0, options.steps - done);
  for (int64_t s = 0; s < toTrain; ++s) {
    runStep(s, progress, s + 1 == toTrain);
    ++done;
    if (options.interruptAtStep == done && world.rank() == options.failRank)
      std::raise(SIGINT); // the handler's own path
    if (s + 1 < toTrain && isStopAgreed())
      return;
    if (options.saveEvery > 0 && done % options.saveEvery == 0 &&
        s + 1 < toTrain)
      saveCheckpointNow(done);
  }
  if (root && toTrain > 1)
    progress.finish();
  // Nothing to train (--steps 0, or a checkpoint already there): the
  // validation loss of the weights as they are, where asked for.
  if (toTrain == 0 && tokens.data->hasValidation() && options.evalEvery > 0) {
    double validationLoss = evaluate();
    if (root)
      if (Status st = progress.evaluation(done, validationLoss,
                                          tokens.getEvaluationTokens(plan));
          !st)
        failHere(st.message());
  }
}

bool Session::isStopAgreed() {
  if (!options.stopOnSignal)
    return false;
  double signal = session::getInterruptSignal();
  if (Status st = world.allReduceMax(&signal, 1); !st)
    failHere(st.message());
  stopSignal = int(signal);
  return stopSignal != 0;
}

void Session::saveStopped() {
  if (!options.saveDir.empty())
    saveCheckpointNow(done);
  if (!root)
    return;
  std::string how =
      options.saveDir.empty()
          ? "nothing saved (no --save DIR)"
          : "resume with the same command and --load " + options.saveDir;
  std::printf("stopped %s after step %lld of %lld: %s\n",
              session::describeStop(stopSignal).c_str(), (long long)done,
              (long long)options.steps, how.c_str());
  std::fflush(stdout);
}

/// One step: the passes, the gradients (dumped or compared after the
/// first), the gradient norm and clipping, the update, the progress line
/// and, when due, the validation loss.
void Session::runStep(int64_t s, ProgressLog &progress, bool last) {
  auto start = std::chrono::steady_clock::now();
  int64_t step = done; // 0-based data step; the optimizer step is +1
  double loss = 0, norm = 0;
  if (Status st = trainer->runStep(step, loss); !st)
    failHere(st.message());
  // How evenly the routers spread the step's tokens (every rank sums).
  std::vector<double> copies;
  if (Status st = trainer->expertLoad(copies); !st)
    failHere(st.message());
  if (Status st = trainer->finalizeGradients(); !st)
    failHere(st.message());
  if (s == 0 && !options.dumpGrads.empty())
    if (Status st = dumpGradients(options.dumpGrads, trainer->getParameters());
        !st)
      failHere(st.message());
  if (s == 0 && !options.checkAgainst.empty())
    if (Status st = compareGradients(options.checkAgainst,
                                     trainer->getParameters(),
                                     result.worstGrad, result.worstName);
        !st)
      failHere(st.message());
  if (Status st = trainer->gradientNorm(norm); !st)
    failHere(st.message());
  // Every rank has the same norm: all stop, the weights untouched.
  if (!std::isfinite(norm) || !std::isfinite(loss)) {
    std::ostringstream why;
    why << "step " << step + 1 << " diverged (loss " << loss
        << ", gradient norm " << norm
        << "): the weights are left as they were; lower --lr, or set "
           "--clip-grad";
    failEverywhere(world, why.str());
  }
  result.losses.push_back(loss);
  result.gradNorms.push_back(norm);
  float clipScale = getClipScale(norm, settings.clipNorm);
  if (Status st = trainer->applyOptimizer(step + 1, clipScale); !st)
    failHere(st.message());
  // DeepSeek-V3's balancing: the routers' biases follow the step's load.
  if (Status st = applyExpertBias(plan.model, copies, trainer->getParameters());
      !st)
    failHere(st.message());
  StepRecord record;
  record.step = step + 1;
  record.loss = loss;
  record.gradNorm = norm;
  record.learningRate = settings.schedule.at(step + 1);
  record.clipScale = clipScale;
  record.seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  ExpertLoad load = summarizeExpertLoad(plan.model, copies);
  if (root)
    if (Status st = progress.record(record.step, loss, record.learningRate,
                                    norm, clipScale, record.seconds,
                                    copies.empty() ? nullptr : &load);
        !st)
      failHere(st.message());
  if (stepHook)
    stepHook(record);
  if (tokens.data->hasValidation() && options.evalEvery > 0 &&
      ((step + 1) % options.evalEvery == 0 || last)) {
    double validationLoss = evaluate();
    if (root)
      if (Status st = progress.evaluation(step + 1, validationLoss,
                                          tokens.getEvaluationTokens(plan));
          !st)
        failHere(st.message());
  }
}

/// The mean loss over the validation steps (always the same batches),
/// their gradients discarded.
double Session::evaluate() {
  tokens.data->setValidating(true);
  double sum = 0;
  for (int64_t k = 0; k < tokens.evalSteps; ++k) {
    double loss = 0;
    if (Status st = trainer->evaluateStep(k, loss); !st)
      failHere(st.message());
    sum += loss;
  }
  // What the vocabulary shards' passes added (they make loss and gradient
  // together).
  trainer->getParameters().zeroGrads();
  tokens.data->setValidating(false);
  return sum / double(tokens.evalSteps);
}

/// --dump-grads: the losses and gradient norms of every step beside the
/// first step's gradients.
void Session::writeDumps() {
  if (options.dumpGrads.empty() || !root)
    return;
  for (auto [file, values] : {std::pair{"/losses.txt", &result.losses},
                              std::pair{"/grad-norms.txt", &result.gradNorms}}) {
    std::ostringstream os;
    os.precision(10);
    for (double value : *values)
      os << value << "\n";
    if (Status st = writeFileAtomically(options.dumpGrads + file, os.str());
        !st)
      failHere(st.message());
  }
}

bool Session::writesWeights() const {
  // Context-parallel ranks hold the same weights: the first writes them.
  return backend->replica < plan.ep && backend->context == 0;
}

WrittenParameters Session::getWrittenParameters() const {
  if (backend->replica % plan.ep == 0)
    return nullptr;
  return [](const ParameterSpec &spec) { return spec.expertShare; };
}

/// The replicas hold the same parameters, so the first one writes them, a
/// file per device and shard (under expert parallelism the first expert
/// group, its other members their experts only). A sharded optimizer state (ZeRO-1) is
/// gathered whole on every replica first.
void Session::saveCheckpointNow(int64_t stepsDone) {
  if (Status st = trainer->gatherOptimizerState(); !st)
    failHere(st.message());
  if (writesWeights())
    if (Status st = saveCheckpoint(
            options.saveDir, stepsDone, trainer->getParameters(),
            backend->model ? *backend->model : comm(), settings,
            options.keepCheckpoints, getWrittenParameters());
        !st)
      failHere(st.message());
  if (backend->model)
    world.barrier();
  if (root) {
    std::printf("saved checkpoint %s (step %lld)\n", options.saveDir.c_str(),
                (long long)stepsDone);
    std::fflush(stdout);
  }
}

/// Text drawn from, or a Hugging Face directory written of, weights no
/// step trained and nothing loaded is rarely what was meant: say so (the
/// run still does it -- a random model is a fair smoke test).
void Session::noteUntrainedOutputs() const {
  bool generates = options.sampling.newTokens > 0,
       exports = !options.saveHF.empty();
  if (!root || done > 0 || !options.loadDir.empty() ||
      !options.loadHF.empty() || (!generates && !exports))
    return;
  std::string what = generates && exports ? "--generate and --save-hf use"
                     : generates          ? "--generate draws from"
                                          : "--save-hf writes";
  std::fprintf(stderr,
               "%s: note: %s untrained weights (their random "
               "initialisation, seed %llu): no step ran and neither --load "
               "nor --load-hf gave any\n",
               options.programName.c_str(), what.c_str(),
               (unsigned long long)settings.seed);
}

/// The first replica's ranks gather their parameters to rank 0, which
/// writes the directory.
void Session::saveHuggingFaceNow(int64_t stepsDone) {
  if (Status st = trainer->gatherOptimizerState(); !st)
    failHere(st.message());
  if (writesWeights())
    if (Status st = saveHuggingFace(options.saveHF, options.loadHF,
                                    plan.model, stepsDone,
                                    trainer->getParameters(),
                                    backend->model ? *backend->model : comm(),
                                    getWrittenParameters());
        !st)
      failHere(st.message());
  if (backend->model)
    world.barrier();
  // The dataset's tokenizer beside the weights (HfTokenizer.h): rank 0
  // writes it, every rank learns whether that worked.
  std::string with;
  Status st = Status::ok();
  if (root && !tokens.tokenizer.file.empty())
    st = exportTokenizer(options.saveHF, tokens.tokenizer, with);
  agree(world, st);
  if (root)
    std::printf("saved %s (Hugging Face, step %lld%s%s)\n",
                options.saveHF.c_str(), (long long)stepsDone,
                with.empty() ? "" : ", ", with.c_str());
}

} // namespace sluice::rt
