//===- sluice-run.cpp - Train with a plan, one process per device ---------===//
//
//   mpirun -np P sluice-run plan.json [--backend cpu] [--steps N]
//       [--seed S] [--data tokens.bin [--data-dtype uint16]] [--lr LR]
//       [--dump-grads DIR | --check-against DIR] [--save DIR] [--load DIR]
//       [--profile FILE]
//   sluice-run plan.json --reference ...      (one process, no partitioning)
//
// docs/sluice-run.md describes every flag. The training session is the
// runtime's library (runtime/session/Session.h); this tool is its flags.
// Errors are one line on one rank; a rank that fails mid-step ends the
// whole job.
//
//===----------------------------------------------------------------------===//

#include "HostMemory.h"
#include "MpiCommunicator.h"
#include "Session.h"

#include "sluice/Support/Flags.h"
#include "sluice/Version.h"

#include "llvm/Support/CommandLine.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

using namespace sluice::rt;
namespace cl = llvm::cl;

namespace {
/// What the flags write: each flag is bound to its field, whose default
/// (SessionOptions.h) is the flag's.
SessionOptions options;

cl::OptionCategory category("sluice-run options");
cl::opt<std::string, true> planPath(cl::Positional,
                                    cl::location(options.planPath),
                                    cl::desc("<plan.json>"), cl::Required,
                                    cl::cat(category));
cl::opt<std::string, true>
    backendName("backend", cl::location(options.backend),
                cl::desc("cpu (default) or cuda (a GPU per "
                         "rank, shared when ranks outnumber "
                         "GPUs)"),
                cl::cat(category));
cl::opt<std::string, true> precisionName(
    "precision", cl::location(options.precision),
    cl::desc("bf16, fp8 (bf16 with the transformer layers' GEMMs on FP8 "
             "operands) or fp32 (default: the plan's)"),
    cl::value_desc("bf16|fp8|fp32"), cl::cat(category));
cl::opt<std::string, true> transport(
    "transport", cl::location(options.transport),
    cl::desc("How ranks communicate. --backend cuda: nccl (ranks share a "
             "GPU only with NCCL 2.30+ and NCCL_MULTI_RANK_GPU_ENABLE=1), "
             "mpi (through pinned host memory; any placement) or auto "
             "(default: nccl where it can). --backend cpu: mpi (auto) or "
             "nccl (MPI held to NCCL's rules: an order NCCL could not run "
             "is reported instead of run)"),
    cl::cat(category));
cl::opt<int64_t, true> steps("steps", cl::location(options.steps),
                             cl::desc("The training run's steps in all "
                                      "(default 1): a run resumed with "
                                      "--load trains those its checkpoint "
                                      "has not taken; 0 trains none "
                                      "(evaluate or export only)"),
                             cl::cat(category));
cl::opt<uint64_t, true>
    seed("seed", cl::location(options.seed.value),
         cl::desc("Seed of weights and synthetic data (default 1)"),
         cl::cat(category));
cl::opt<std::string, true>
    dataPath("data", cl::location(options.dataPath),
             cl::desc("A token dataset from sluice-tokenize (default: "
                      "synthetic tokens)"),
             cl::value_desc("FILE"), cl::cat(category));
cl::opt<std::string, true> dataDtype(
    "data-dtype", cl::location(options.dataDtype),
    cl::desc("With --data: the file is raw little-endian tokens of this "
             "type, uint16 or uint32, with no header"),
    cl::cat(category));
cl::opt<int64_t, true> evalEvery(
    "eval-every", cl::location(options.evalEvery),
    cl::desc("With --data: the validation loss every N steps and after the "
             "last, on the held-out part (default 0: none held out)"),
    cl::cat(category));
cl::opt<double, true> valFraction(
    "val-fraction", cl::location(options.valFraction.value),
    cl::desc("With --eval-every: the share of --data's tokens (its last) "
             "held out for validation (default 0.05)"),
    cl::cat(category));
cl::opt<int64_t, true> evalSteps(
    "eval-steps", cl::location(options.evalSteps),
    cl::desc("Steps' worth of validation sequences per evaluation (default: "
             "the whole steps the held-out part fills, at most 32)"),
    cl::cat(category));
cl::opt<float, true> weightDecay(
    "weight-decay", cl::location(options.weightDecay.value),
    cl::desc("AdamW's decoupled weight decay, on matrices and tables, not "
             "on norms or biases (default 0: Adam)"),
    cl::cat(category));
cl::opt<int64_t, true> warmupSteps(
    "warmup-steps", cl::location(options.warmupSteps.value),
    cl::desc("Steps of linear learning-rate warmup from 0 (default 0)"),
    cl::cat(category));
cl::opt<std::string, true>
    lrDecay("lr-decay", cl::location(options.lrDecay.value),
            cl::desc("After warmup: none (default), linear or cosine, down to "
                     "--min-lr at --lr-decay-steps"),
            cl::cat(category));
cl::opt<int64_t, true> lrDecaySteps(
    "lr-decay-steps", cl::location(options.lrDecaySteps),
    cl::desc("The step the decay reaches --min-lr (default: the last step "
             "of this run; give it when a run resumes)"),
    cl::cat(category));
cl::opt<float, true>
    minLearningRate("min-lr", cl::location(options.minLearningRate.value),
                    cl::desc("The decay's floor (default 0)"),
                    cl::cat(category));
cl::opt<float, true> learningRate("lr",
                                  cl::location(options.learningRate.value),
                                  cl::desc("Adam learning rate (default 1e-3)"),
                                  cl::cat(category));
cl::opt<bool, true>
    reference("reference", cl::location(options.reference),
              cl::desc("Run the model unpartitioned in this process"),
              cl::cat(category));
cl::opt<std::string, true>
    dumpGrads("dump-grads", cl::location(options.dumpGrads),
              cl::desc("Write the first step's gradients and "
                       "every step's loss to DIR"),
              cl::value_desc("DIR"), cl::cat(category));
cl::opt<std::string, true> checkAgainst(
    "check-against", cl::location(options.checkAgainst),
    cl::desc("Compare gradients and losses with a --dump-grads DIR"),
    cl::value_desc("DIR"), cl::cat(category));
cl::opt<std::string> measureAgainst(
    "measure-against",
    cl::desc("Compare gradients and losses with a --dump-grads DIR and "
             "print the errors, judging nothing (a band being measured)"),
    cl::value_desc("DIR"), cl::cat(category));
cl::opt<double, true> lossTolerance(
    "loss-tolerance", cl::location(options.lossTolerance),
    cl::desc("Relative loss tolerance of the check (default 1e-5)"),
    cl::cat(category));
cl::opt<double, true> gradTolerance(
    "grad-tolerance", cl::location(options.gradTolerance),
    cl::desc("Relative gradient tolerance of the check (default 1e-4)"),
    cl::cat(category));
cl::opt<double, true> clipGrad(
    "clip-grad", cl::location(options.clipGrad.value),
    cl::desc("Clip the gradients to this global L2 norm before each update "
             "(default 0: no clipping)"),
    cl::cat(category));
cl::opt<int64_t, true> logEvery(
    "log-every", cl::location(options.logEvery),
    cl::desc("Print the progress line every N steps, and after the last "
             "(default 1)"),
    cl::cat(category));
cl::opt<std::string, true>
    metricsPath("metrics", cl::location(options.metricsPath),
                cl::desc("Append each progress line's figures to FILE as a "
                         "JSON object per line"),
                cl::value_desc("FILE"), cl::cat(category));
cl::opt<double, true> peakTflops(
    "peak-tflops", cl::location(options.peakTflops),
    cl::desc("One device's peak TFLOP/s for the MFU figure (default: the "
             "datasheet's for H100, H200 and A100; none for CPUs)"),
    cl::cat(category));
cl::opt<std::string, true>
    saveDir("save", cl::location(options.saveDir),
            cl::desc("Write a checkpoint to DIR at the end (and every "
                     "--save-every steps)"),
            cl::value_desc("DIR"), cl::cat(category));
cl::opt<int64_t, true> saveEvery(
    "save-every", cl::location(options.saveEvery),
    cl::desc("With --save: also checkpoint every N steps (default 0: only "
             "at the end)"),
    cl::cat(category));
cl::opt<int, true> keepCheckpoints(
    "keep-checkpoints", cl::location(options.keepCheckpoints),
    cl::desc("With --save: how many of the newest steps' checkpoints DIR "
             "keeps (default 1)"),
    cl::cat(category));
cl::opt<int64_t, true> loadStep(
    "load-step", cl::location(options.loadStep),
    cl::desc("With --load: the step to resume from (default: the newest)"),
    cl::cat(category));
cl::opt<std::string, true>
    loadHF("load-hf", cl::location(options.loadHF),
           cl::desc("Start from a Hugging Face model directory's weights "
                    "(config.json and safetensors; GPT-2, Llama 2/3/3.1/3.2, "
                    "Mistral, Qwen2/2.5, Gemma, Gemma-2)"),
           cl::value_desc("DIR"), cl::cat(category));
cl::opt<std::string, true>
    saveHF("save-hf", cl::location(options.saveHF),
           cl::desc("At the end, write the weights as a Hugging Face model "
                    "directory (fp32 safetensors and config.json)"),
           cl::value_desc("DIR"), cl::cat(category));
cl::opt<int64_t, true> generateTokens(
    "generate", cl::location(options.sampling.newTokens),
    cl::desc("After the steps, draw N tokens after --prompt from the trained "
             "model and print them (default 0: none)"),
    cl::value_desc("N"), cl::cat(category));
cl::opt<std::string, true> prompt(
    "prompt", cl::location(options.prompt),
    cl::desc("With --generate: the text to continue, encoded with --data's "
             "tokenizer"),
    cl::value_desc("TEXT"), cl::cat(category));
cl::list<int32_t, std::vector<int32_t>> promptIds(
    "prompt-ids", cl::location(options.promptIds),
    cl::desc("With --generate: the prompt as token ids, comma-separated"),
    cl::value_desc("ID,..."), cl::CommaSeparated, cl::cat(category));
cl::opt<double, true> temperature(
    "temperature", cl::location(options.sampling.temperature),
    cl::desc("With --generate: the logits divided by it before sampling; 0 "
             "is greedy (default 1)"),
    cl::cat(category));
cl::opt<int64_t, true> topK("top-k", cl::location(options.sampling.topK),
                            cl::desc("With --generate: sample among the K most "
                                     "likely tokens (default 0: all)"),
                            cl::cat(category));
cl::opt<double, true>
    topP("top-p", cl::location(options.sampling.topP),
         cl::desc("With --generate: sample among the fewest most likely tokens "
                  "whose probability reaches P (default 1: all)"),
         cl::cat(category));
cl::opt<std::string, true>
    loadDir("load", cl::location(options.loadDir),
            cl::desc("Resume from a checkpoint, with the optimizer settings "
                     "and seed it recorded unless given again"),
            cl::value_desc("DIR"), cl::cat(category));
cl::opt<bool> memoryOnly("memory", cl::cat(category),
                         cl::desc("Print what a rank of each pipeline device "
                                  "needs in memory (its training state "
                                  "apart) and exit: no ranks, nothing run"));
// What torchtitan and most trainers call it.
cl::alias resume("resume", cl::desc("Alias for --load"), cl::aliasopt(loadDir),
                 cl::cat(category));
cl::opt<std::string, true>
    profilePath("profile", cl::location(options.profilePath),
                cl::desc("Write measured pass times (a --costs file)"),
                cl::value_desc("FILE"), cl::cat(category));
cl::opt<bool, true> profileSlices(
    "profile-slices", cl::location(options.profileSlices),
    cl::desc("With --profile: also time each stage over a grid of slice "
             "lengths and contexts (for --slicing terapipe)"),
    cl::cat(category));
cl::opt<bool, true> timing("timing", cl::location(options.timing),
                           cl::desc("Print where each rank's last step went"),
                           cl::cat(category));
cl::opt<std::string, true> tracePath(
    "trace", cl::location(options.tracePath),
    cl::desc("Write the last step's passes and vocabulary collectives, per "
             "rank and stream, as a Chrome trace (Perfetto)"),
    cl::value_desc("FILE"), cl::cat(category));
cl::opt<int64_t, true> failAt("fail-at-instruction",
                              cl::location(options.failAtInstruction),
                              cl::desc("Fault injection: fail before this "
                                       "instruction of --fail-rank's list"),
                              cl::cat(category));
cl::opt<double, true> memoryLimit(
    "memory-limit", cl::location(options.memoryLimit),
    cl::desc("Host memory the ranks on one host may use, in GiB; a run "
             "that needs more is refused before it starts (default: the "
             "host's available memory)"),
    cl::cat(category));
cl::opt<bool, true> failHang(
    "fail-hang", cl::location(options.failHang),
    cl::desc("Fault injection: --fail-rank stops at --fail-at-instruction "
             "and waits forever instead of failing (a peer that never "
             "joins)"),
    cl::cat(category));
/// --threads. libLLVM registers an option of that name for its own tools,
/// which sluice-run never reads; registering ours beside it would be an
/// error, so main() removes LLVM's first and then makes this one.
std::unique_ptr<cl::opt<int>> threads;
void addThreadsOption() {
  auto &&registered = cl::getRegisteredOptions();
  if (auto it = registered.find("threads"); it != registered.end())
    it->second->removeArgument();
  threads = std::make_unique<cl::opt<int>>(
      "threads",
      cl::desc("The CPU backend's threads a rank, for its kernels and "
               "OpenBLAS (default: OPENBLAS_NUM_THREADS if set, else this "
               "host's cores over the ranks on it)"),
      cl::init(0), cl::cat(category));
}
cl::opt<double, true> commTimeout(
    "comm-timeout", cl::location(options.commTimeout),
    cl::desc("Seconds a rank waits for a peer's communication before it "
             "ends the job, naming the operation (NCCL; default 600)"),
    cl::cat(category));
cl::opt<std::string, true> commOrder(
    "comm-order", cl::location(options.commOrder),
    cl::desc("The order each rank issues its communication in: auto "
             "(default: global under NCCL and for plans with vocabulary "
             "collectives, the plan's order over MPI otherwise), global (one "
             "order every rank agrees on, which NCCL needs) or plan (each "
             "device's plan order; with --backend cpu --transport nccl the "
             "communicator layout before 0.15: shows what NCCL would do "
             "with it)"),
    cl::cat(category));
cl::opt<bool, true> overlapGroups(
    "overlap-groups", cl::location(options.overlapGroups),
    cl::desc("Run a plan's overlapped groups (dualpipev's pairs) "
             "overlapped: one pass computes while the other's expert "
             "all-to-all is in flight -- on CPU ranks interleaved, on a GPU "
             "on two compute streams (default true; false runs them one "
             "after the other, the same computation)"),
    cl::init(true), cl::cat(category));
cl::opt<double, true> slowAllToAll(
    "slow-all-to-all", cl::location(options.slowAllToAllMs),
    cl::desc("Benchmarks only: every expert all-to-all takes at least MS "
             "milliseconds, as over a slow link (what overlapped groups "
             "hide; bench/dualpipev-cpu.sh)"),
    cl::value_desc("MS"), cl::cat(category), cl::Hidden);
cl::opt<int, true> failRank("fail-rank", cl::location(options.failRank),
                            cl::desc("The rank --fail-at-instruction "
                                     "fails (default 0)"),
                            cl::cat(category));
cl::opt<int64_t, true> interruptAt(
    "interrupt-at-step", cl::location(options.interruptAtStep),
    cl::desc("Fault injection: --fail-rank receives SIGINT after this step "
             "(the stop every rank must agree on)"),
    cl::cat(category), cl::Hidden);

/// The options the flags wrote, completed: the settings a resumed run may
/// take from its checkpoint know whether they were given, and the
/// defaults that come from elsewhere are filled in.
SessionOptions getOptions() {
  options.learningRate.given = learningRate.getNumOccurrences() > 0;
  options.minLearningRate.given = minLearningRate.getNumOccurrences() > 0;
  options.weightDecay.given = weightDecay.getNumOccurrences() > 0;
  options.warmupSteps.given = warmupSteps.getNumOccurrences() > 0;
  options.lrDecay.given = lrDecay.getNumOccurrences() > 0;
  options.clipGrad.given = clipGrad.getNumOccurrences() > 0;
  options.seed.given = seed.getNumOccurrences() > 0;
  options.valFraction.given = valFraction.getNumOccurrences() > 0;
  // SLUICE_TRANSPORT gives --transport's default (the test suite runs
  // every multi-rank test under the NCCL emulation this way).
  if (transport.getNumOccurrences() == 0)
    if (const char *env = std::getenv("SLUICE_TRANSPORT"); env && *env)
      options.transport = env;
  options.threads = *threads;
  options.stopOnSignal = true;
  return options;
}

/// Ends the job the way `outcome` asks (Outcome.h): each line of its
/// report as an error, then every rank stops.
[[noreturn]] void end(const Outcome &outcome, Session *session) {
  const std::string &report = outcome.getReport();
  for (size_t at = 0; at < report.size();) {
    size_t line = std::min(report.find('\n', at), report.size());
    std::fprintf(stderr, "sluice-run: error: %s\n",
                 report.substr(at, line - at).c_str());
    at = line + 1;
  }
  std::fflush(stderr);
  int worldSize = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  if (outcome.isThisRankOnly() && worldSize > 1) {
    if (session)
      session->abortJob(1);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  std::exit(1);
}
} // namespace

int main(int argc, char **argv) {
  // Serialized: an overlapped group's two lanes call MPI from two threads,
  // one at a time (runtime/executor/PassLanes.h).
  int threading = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &threading);
  addThreadsOption();
  cl::HideUnrelatedOptions(category);
  sluice::setVersionPrinter();
  // Every rank reads the same flags: rank 0 says what is wrong with them.
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!sluice::parseFlags(argc, argv,
                          "sluice-run: train a model with a plan\n",
                          rank == 0)) {
    MPI_Finalize();
    return 1;
  }
  if (threading < MPI_THREAD_SERIALIZED)
    options.overlapGroups = false; // the lanes would need it
  // --measure-against is --check-against's comparison, not judged.
  if (measureAgainst.getNumOccurrences() > 0) {
    if (!options.checkAgainst.empty() || !options.dumpGrads.empty()) {
      if (rank == 0)
        std::fprintf(stderr, "sluice-run: error: --measure-against excludes "
                             "--check-against and --dump-grads\n");
      MPI_Finalize();
      return 1;
    }
    options.checkAgainst = measureAgainst;
    options.measureOnly = true;
  }
  if (memoryOnly) {
    Plan plan;
    Status st = loadPlan(options.planPath, plan);
    if (st && rank == 0)
      std::fputs(describeMemoryNeeds(plan).c_str(), stdout);
    else if (!st && rank == 0)
      std::fprintf(stderr, "sluice-run: error: %s\n", st.message().c_str());
    MPI_Finalize();
    return st ? 0 : 1;
  }
  MpiCommunicator world;
  std::unique_ptr<Session> session;
  if (Outcome o = Session::open(getOptions(), world, session); !o)
    end(o, session.get());
  if (Outcome o = session->train(); !o)
    end(o, session.get());
  // Stopped by a signal, saved: the exit status a shell gives a process
  // the signal ended, so a script or scheduler sees the run did not finish.
  int stopped = session->getStopSignal();
  MPI_Finalize();
  return stopped ? 128 + stopped : 0;
}
