//===- sluice-run.cpp - Train with a plan, one process per device ---------===//
//
//   mpirun -np P sluice-run plan.json [--backend cpu] [--steps N]
//       [--seed S] [--data tokens.bin [--data-dtype uint16]] [--lr LR]
//       [--dump-grads DIR | --check-against DIR] [--save DIR] [--load DIR]
//       [--profile FILE]
//   sluice-run plan.json --reference ...      (one process, no partitioning)
//
// docs/sluice-run.md describes every flag. Errors are one line on one
// rank; a rank that fails mid-step ends the whole job.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "CommLayout.h"
#include "CommOrder.h"
#include "CpuDevice.h"
#include "Data.h"
#include "Executor.h"
#include "HostMemory.h"
#include "HuggingFace.h"
#include "MpiCommunicator.h"
#include "NcclEmulation.h"
#include "Plan.h"
#include "Progress.h"
#if SLUICE_HAVE_CUDA
#include "CudaBackend.h"
#endif

#include "sluice/Version.h"

#include "llvm/Support/CommandLine.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

using namespace sluice::rt;
namespace cl = llvm::cl;

namespace {
cl::OptionCategory category("sluice-run options");
cl::opt<std::string> planPath(cl::Positional, cl::desc("<plan.json>"),
                              cl::Required, cl::cat(category));
cl::opt<std::string> backendName("backend",
                                 cl::desc("cpu (default) or cuda (a GPU per "
                                          "rank, shared when ranks outnumber "
                                          "GPUs)"),
                                 cl::init("cpu"), cl::cat(category));
cl::opt<std::string> precisionName(
    "precision",
    cl::desc("bf16 or fp32 (default: the plan's; the CPU backend runs fp32)"),
    cl::value_desc("bf16|fp32"), cl::cat(category));
cl::opt<std::string> transport(
    "transport",
    cl::desc("How ranks communicate. --backend cuda: nccl (ranks share a "
             "GPU only with NCCL 2.30+ and NCCL_MULTI_RANK_GPU_ENABLE=1), "
             "mpi (through pinned host memory; any placement) or auto "
             "(default: nccl where it can). --backend cpu: mpi (auto) or "
             "nccl (MPI held to NCCL's rules: an order NCCL could not run "
             "is reported instead of run)"),
    cl::init("auto"), cl::cat(category));
cl::opt<int64_t> steps("steps", cl::desc("Training steps to run (default 1)"),
                       cl::init(1), cl::cat(category));
cl::opt<uint64_t>
    seed("seed", cl::desc("Seed of weights and synthetic data (default 1)"),
         cl::init(1), cl::cat(category));
cl::opt<std::string>
    dataPath("data",
             cl::desc("A token dataset from sluice-tokenize (default: "
                      "synthetic tokens)"),
             cl::value_desc("FILE"), cl::cat(category));
cl::opt<std::string> dataDtype(
    "data-dtype",
    cl::desc("With --data: the file is raw little-endian tokens of this "
             "type, uint16 or uint32, with no header"),
    cl::cat(category));
cl::opt<int64_t> evalEvery(
    "eval-every",
    cl::desc("With --data: the validation loss every N steps and after the "
             "last, on the held-out part (default 0: none held out)"),
    cl::init(0), cl::cat(category));
cl::opt<double> valFraction(
    "val-fraction",
    cl::desc("With --eval-every: the share of --data's tokens (its last) "
             "held out for validation (default 0.05)"),
    cl::init(0.05), cl::cat(category));
cl::opt<int64_t> evalSteps(
    "eval-steps",
    cl::desc("Steps' worth of validation sequences per evaluation (default: "
             "the whole steps the held-out part fills, at most 32)"),
    cl::init(0), cl::cat(category));
cl::opt<float> weightDecay(
    "weight-decay",
    cl::desc("AdamW's decoupled weight decay, on matrices and tables, not "
             "on norms or biases (default 0: Adam)"),
    cl::init(0.0f), cl::cat(category));
cl::opt<int64_t> warmupSteps(
    "warmup-steps",
    cl::desc("Steps of linear learning-rate warmup from 0 (default 0)"),
    cl::init(0), cl::cat(category));
cl::opt<std::string> lrDecay(
    "lr-decay",
    cl::desc("After warmup: none (default), linear or cosine, down to "
             "--min-lr at --lr-decay-steps"),
    cl::init("none"), cl::cat(category));
cl::opt<int64_t> lrDecaySteps(
    "lr-decay-steps",
    cl::desc("The step the decay reaches --min-lr (default: the last step "
             "of this run; give it when a run resumes)"),
    cl::init(0), cl::cat(category));
cl::opt<float> minLearningRate("min-lr",
                               cl::desc("The decay's floor (default 0)"),
                               cl::init(0.0f), cl::cat(category));
cl::opt<float> learningRate("lr", cl::desc("Adam learning rate (default 1e-3)"),
                            cl::init(1e-3f), cl::cat(category));
cl::opt<bool> reference("reference",
                        cl::desc("Run the model unpartitioned in this process"),
                        cl::cat(category));
cl::opt<std::string> dumpGrads("dump-grads",
                               cl::desc("Write the first step's gradients and "
                                        "every step's loss to DIR"),
                               cl::value_desc("DIR"), cl::cat(category));
cl::opt<std::string> checkAgainst(
    "check-against",
    cl::desc("Compare gradients and losses with a --dump-grads DIR"),
    cl::value_desc("DIR"), cl::cat(category));
cl::opt<double> lossTolerance(
    "loss-tolerance",
    cl::desc("Relative loss tolerance of the check (default 1e-5)"),
    cl::init(1e-5), cl::cat(category));
cl::opt<double> gradTolerance(
    "grad-tolerance",
    cl::desc("Relative gradient tolerance of the check (default 1e-4)"),
    cl::init(1e-4), cl::cat(category));
cl::opt<double> clipGrad(
    "clip-grad",
    cl::desc("Clip the gradients to this global L2 norm before each update "
             "(default 0: no clipping)"),
    cl::init(0.0), cl::cat(category));
cl::opt<int64_t> logEvery(
    "log-every",
    cl::desc("Print the progress line every N steps, and after the last "
             "(default 1)"),
    cl::init(1), cl::cat(category));
cl::opt<std::string>
    metricsPath("metrics",
                cl::desc("Append each progress line's figures to FILE as a "
                         "JSON object per line"),
                cl::value_desc("FILE"), cl::cat(category));
cl::opt<double> peakTflops(
    "peak-tflops",
    cl::desc("One device's peak TFLOP/s for the MFU figure (default: the "
             "datasheet's for H100, H200 and A100; none for CPUs)"),
    cl::init(0.0), cl::cat(category));
cl::opt<std::string>
    saveDir("save",
            cl::desc("Write a checkpoint to DIR at the end (and every "
                     "--save-every steps)"),
            cl::value_desc("DIR"), cl::cat(category));
cl::opt<int64_t> saveEvery(
    "save-every",
    cl::desc("With --save: also checkpoint every N steps (default 0: only "
             "at the end)"),
    cl::init(0), cl::cat(category));
cl::opt<int> keepCheckpoints(
    "keep-checkpoints",
    cl::desc("With --save: how many of the newest steps' checkpoints DIR "
             "keeps (default 1)"),
    cl::init(1), cl::cat(category));
cl::opt<int64_t> loadStep(
    "load-step",
    cl::desc("With --load: the step to resume from (default: the newest)"),
    cl::init(-1), cl::cat(category));
cl::opt<std::string>
    loadHF("load-hf",
           cl::desc("Start from a Hugging Face model directory's weights "
                    "(config.json and safetensors; GPT-2, Llama, Mistral)"),
           cl::value_desc("DIR"), cl::cat(category));
cl::opt<std::string>
    saveHF("save-hf",
           cl::desc("At the end, write the weights as a Hugging Face model "
                    "directory (fp32 safetensors and config.json)"),
           cl::value_desc("DIR"), cl::cat(category));
cl::opt<std::string>
    loadDir("load",
            cl::desc("Resume from a checkpoint, with the optimizer settings "
                     "and seed it recorded unless given again"),
            cl::value_desc("DIR"), cl::cat(category));
cl::opt<std::string>
    profilePath("profile",
                cl::desc("Write measured pass times (a --costs file)"),
                cl::value_desc("FILE"), cl::cat(category));
cl::opt<bool> profileSlices(
    "profile-slices",
    cl::desc("With --profile: also time each stage over a grid of slice "
             "lengths and contexts (for --slicing terapipe)"),
    cl::cat(category));
cl::opt<bool> timing("timing",
                     cl::desc("Print where each rank's last step went"),
                     cl::cat(category));
cl::opt<std::string> tracePath(
    "trace",
    cl::desc("Write the last step's passes and vocabulary collectives, per "
             "rank and stream, as a Chrome trace (Perfetto)"),
    cl::value_desc("FILE"), cl::cat(category));
cl::opt<int64_t> failAt("fail-at-instruction",
                        cl::desc("Fault injection: fail before this "
                                 "instruction of --fail-rank's list"),
                        cl::init(-1), cl::cat(category));
cl::opt<double> memoryLimit(
    "memory-limit",
    cl::desc("Host memory the ranks on one host may use, in GiB; a run "
             "that needs more is refused before it starts (default: the "
             "host's available memory)"),
    cl::init(-1), cl::cat(category));
cl::opt<bool> failHang(
    "fail-hang",
    cl::desc("Fault injection: --fail-rank stops at --fail-at-instruction "
             "and waits forever instead of failing (a peer that never "
             "joins)"),
    cl::cat(category));
cl::opt<double> commTimeout(
    "comm-timeout",
    cl::desc("Seconds a rank waits for a peer's communication before it "
             "ends the job, naming the operation (NCCL; default 600)"),
    cl::init(600), cl::cat(category));
cl::opt<std::string> commOrder(
    "comm-order",
    cl::desc("The order each rank issues its communication in: global "
             "(default; one order every rank agrees on, which NCCL needs) or "
             "plan (each device's plan order, with --backend cpu --transport "
             "nccl the communicator layout before 0.15: shows what NCCL "
             "would do with it)"),
    cl::init("global"), cl::cat(category));
cl::opt<int> failRank("fail-rank",
                      cl::desc("The rank --fail-at-instruction "
                               "fails (default 0)"),
                      cl::init(0), cl::cat(category));

/// Ends this rank after a failure: one line, then every rank stops.
[[noreturn]] void failRun(Communicator &comm, const std::string &message) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "sluice-run: error: rank %d: %s\n", rank,
               message.c_str());
  std::fflush(stderr);
  int worldSize = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  if (worldSize > 1)
    comm.abort(1);
  MPI_Finalize();
  std::exit(1);
}

/// Ends every rank after an error all of them found (plan, data, flags):
/// rank 0 says it once.
[[noreturn]] void failEverywhere(Communicator &comm,
                                 const std::string &message) {
  if (comm.rank() == 0)
    std::fprintf(stderr, "sluice-run: error: %s\n", message.c_str());
  MPI_Finalize();
  std::exit(1);
}

/// Refuses a run whose ranks on some host need more memory than it has
/// (or than --memory-limit), before anything is allocated: the kernel would
/// otherwise kill a rank half-way through the first step.
void checkHostMemory(Communicator &comm, const Plan &plan, int device) {
  MemoryNeed mine = reference
                        ? getReferenceMemoryNeed(plan.model, plan.precision)
                        : getDeviceMemoryNeed(plan, device);
  MemoryNeed host = mine;
  int hostRanks = 1, hostRank = 0;
  MPI_Comm node = MPI_COMM_NULL;
  if (comm.size() > 1) {
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, comm.rank(),
                        MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &hostRanks);
    MPI_Comm_rank(node, &hostRank);
    int64_t sums[2] = {mine.parameters, mine.bytes}, totals[2];
    MPI_Allreduce(sums, totals, 2, MPI_INT64_T, MPI_SUM, node);
    host.parameters = totals[0];
    host.bytes = totals[1];
    MPI_Comm_free(&node);
  }
  int64_t limit = memoryLimit >= 0
                      ? int64_t(memoryLimit * 1024.0 * 1024.0 * 1024.0)
                      : getAvailableHostBytes();
  std::string who =
      reference ? std::string("the reference needs")
      : hostRanks == 1
          ? "rank " + std::to_string(comm.rank()) + " needs"
          : "the " + std::to_string(hostRanks) + " ranks on this host need";
  // What helps depends on where the memory goes: ranks sharing a host
  // hold the whole model between them (and each its own activations), so
  // more ranks on it need more, not less.
  std::string advice =
      reference ? "a smaller model (--seq-len, --micro-batch at compile "
                  "time), or --memory-limit"
      : hostRanks == comm.size() && hostRanks > 1
          ? "more ranks on one host need more memory, not less: spread "
            "them over more hosts (mpirun --hostfile), or compile a "
            "smaller model (--seq-len, --micro-batch), or set --memory-limit"
          : "more pipeline devices (each holds fewer layers), ranks spread "
            "over more hosts, a smaller model, or --memory-limit";
  Status st = checkMemoryNeed(host, limit, who,
                              memoryLimit >= 0 ? "that --memory-limit allows"
                                               : "available on this host",
                              advice);
  int failed = st ? 0 : 1, anyFailed = failed;
  if (comm.size() > 1)
    MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!anyFailed)
    return;
  // One line per failing host, from its first rank.
  if (failed && hostRank == 0)
    std::fprintf(stderr, "sluice-run: error: %s\n", st.message().c_str());
  MPI_Finalize();
  std::exit(1);
}

std::string gradPath(const std::string &dir, const std::string &name) {
  return dir + "/" + name + ".bin";
}

Status dumpGradients(const std::string &dir, ParameterStore &params) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::vector<float> grads;
  if (Status st = params.read(ParameterStore::Tensor::Grads, grads); !st)
    return st;
  for (const ParameterSpec &spec : params.specs()) {
    const float *g = grads.data() + params.offset(spec.name);
    // A vocabulary shard writes its real rows under their row range, a
    // tensor-parallel slice its elements under its shard's name.
    std::string name = spec.name, bytes;
    if (spec.isShard())
      name += ".rows-" + std::to_string(spec.firstRow) + "-" +
              std::to_string(spec.firstRow + spec.getValidRows());
    if (spec.isSlice())
      name += "." + spec.sliceName;
    for (const TensorRun &run : getRuns(spec))
      bytes.append(reinterpret_cast<const char *>(g + run.local),
                   run.count * sizeof(float));
    if (Status st = writeFileAtomically(gradPath(dir, name), bytes); !st)
      return st;
  }
  return Status::ok();
}

/// The largest relative difference of this rank's gradients from the
/// dumped ones: max |a - b| / max |b| per tensor.
Status compareGradients(const std::string &dir, ParameterStore &params,
                        double &worst, std::string &worstName) {
  worst = 0;
  std::vector<float> grads;
  if (Status st = params.read(ParameterStore::Tensor::Grads, grads); !st)
    return st;
  for (const ParameterSpec &spec : params.specs()) {
    std::ifstream in(gradPath(dir, spec.name), std::ios::binary);
    if (!in)
      return Status::error("'" + dir + "' has no gradient of " + spec.name);
    // A shard or slice compares its elements with theirs in the whole
    // tensor; a vocabulary shard's padding rows must have no gradient.
    in.seekg(0, std::ios::end);
    int64_t fileFloats = int64_t(in.tellg()) / int64_t(sizeof(float));
    in.seekg(0);
    std::vector<TensorRun> runs = getRuns(spec);
    int64_t whole = getWholeElements(spec), reach = 0;
    for (const TensorRun &run : runs)
      if (run.count > 0)
        reach = std::max(reach, run.global + run.count);
    if ((whole >= 0 && fileFloats != whole) || fileFloats < reach)
      return Status::error("the gradient of " + spec.name + " in '" + dir +
                           "' has another size");
    std::vector<float> expected(fileFloats);
    in.read(reinterpret_cast<char *>(expected.data()),
            std::streamsize(fileFloats * sizeof(float)));
    const float *g = grads.data() + params.offset(spec.name);
    std::vector<char> real(spec.size(), 0);
    double diff = 0, scale = 0;
    for (const TensorRun &run : runs)
      for (int64_t i = 0; i < run.count; ++i) {
        real[run.local + i] = 1;
        float want = expected[run.global + i];
        diff = std::max(diff, double(std::fabs(g[run.local + i] - want)));
        scale = std::max(scale, double(std::fabs(want)));
      }
    for (int64_t i = 0; i < spec.size(); ++i)
      if (!real[i] && g[i] != 0.0f)
        return Status::error(
            "padding row " +
            std::to_string(spec.firstRow + i / spec.getRowSize()) + " of " +
            spec.name + " has a gradient");
    double relative = scale > 0 ? diff / scale : diff;
    if (relative >= worst) {
      worst = relative;
      worstName = spec.name;
    }
  }
  return Status::ok();
}

std::string profileJson(Executor &executor, const Plan &plan,
                        Communicator &comm) {
  nlohmann::json stages = nlohmann::json::object();
  // One rank at a time, so that ranks sharing a machine do not slow each
  // other's timings down.
  for (int rank = 0; profileSlices && rank < comm.size(); ++rank) {
    std::map<std::string, std::vector<Executor::SliceSample>> calibration;
    if (rank == comm.rank())
      if (Status st = executor.calibrateSlices(5, calibration); !st)
        failRun(comm, st.message());
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
  return stages.dump();
}

/// This rank's device and the communicators its plan runs over.
struct RankBackend {
  std::unique_ptr<Device> device;
  /// This rank's pipeline, replicas and tensor-parallel shards over MPI
  /// (host values; the CPU backend's transport), where the plan splits
  /// the world.
  std::unique_ptr<MpiCommunicator> hostGroups[3];
#if SLUICE_HAVE_CUDA
  /// The GPU's communicators over those groups (NCCL, or staged MPI).
  cuda::RankComms gpu;
#endif
  /// --backend cpu --transport nccl: the groups under NCCL's rules.
  std::unique_ptr<NcclEmulation> emulation;
  std::unique_ptr<Communicator> emulated[kMeshGroups];
  /// The communicator the plan's pipeline runs over (rank = device).
  Communicator *comm = nullptr;
  /// With data parallelism: the ranks holding this device's replicas, and
  /// which replica this rank is.
  Communicator *replicas = nullptr;
  int replica = 0;
  /// With tensor parallelism: the ranks holding this device's shards.
  Communicator *shards = nullptr;
  /// With either: the ranks of this rank's replica, every device and shard
  /// (they write a checkpoint together).
  std::unique_ptr<Communicator> model;
};

/// Where this rank sits in the plan's mesh: ranks are numbered with the
/// tensor-parallel index fastest, then the data-parallel replica, then
/// the pipeline device (Megatron-LM's order: a node holds whole TP
/// groups). Splits the world into this rank's pipeline (same replica and
/// shard), its replicas (same device and shard), its tensor-parallel group
/// (same device and replica) and its replica's ranks.
void placeOnMesh(const Plan &plan, RankBackend &out) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int tp = plan.tp, dp = plan.dp;
  auto [device, replica, shard] = getMeshPosition(plan, rank);
  // MPI_Comm_split is collective over the world: every rank makes all four.
  out.hostGroups[0] = MpiCommunicator::split(replica * tp + shard, device);
  out.hostGroups[1] = MpiCommunicator::split(device * tp + shard, replica);
  out.replica = replica;
  out.hostGroups[2] = MpiCommunicator::split(device * dp + replica, shard);
  out.model = MpiCommunicator::split(replica, device * tp + shard);
  if (dp == 1)
    out.hostGroups[1].reset();
  if (tp == 1)
    out.hostGroups[2].reset();
}

/// Ends every rank when any failed `st`, so that no rank is left waiting
/// in a collective the others never join: every rank calls it at the same
/// point (a file every rank reads, a part only some ranks hold). Rank 0
/// says each distinct failure once, naming the ranks that had it unless
/// all did.
void agree(MpiCommunicator &world, const Status &st) {
  int failed = st ? 0 : 1, anyFailed = failed;
  if (world.size() > 1)
    MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!anyFailed)
    return;
  std::vector<std::string> all;
  if (!world.gatherToRoot(failed ? st.message() : std::string(), all))
    all.assign(1, st.message());
  if (world.rank() == 0) {
    std::vector<std::pair<std::string, std::vector<int>>> distinct;
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].empty())
        continue;
      auto it = std::find_if(distinct.begin(), distinct.end(),
                             [&](const auto &d) { return d.first == all[r]; });
      if (it == distinct.end())
        distinct.push_back({all[r], {int(r)}});
      else
        it->second.push_back(int(r));
    }
    for (const auto &[message, ranks] : distinct) {
      std::string who;
      if (int(ranks.size()) < world.size()) {
        for (int r : ranks)
          who += (who.empty() ? "" : ", ") + std::to_string(r);
        who = (ranks.size() == 1 ? "rank " : "ranks ") + who + ": ";
      }
      std::fprintf(stderr, "sluice-run: error: %s%s\n", who.c_str(),
                   message.c_str());
    }
  }
  MPI_Finalize();
  std::exit(1);
}

#if SLUICE_HAVE_CUDA
/// GPU memory NCCL takes per communicator (its channels' buffers for the
/// protocols, at the default NCCL_BUFFSIZE) and once per process: an
/// estimate, not yet measured (docs/gpu.md); SLUICE_NCCL_MIB overrides
/// the per-communicator figure.
int64_t getNcclAllowance(const Plan &plan, int rank) {
  int64_t perComm = 96;
  if (const char *v = std::getenv("SLUICE_NCCL_MIB"))
    perComm = std::max<int64_t>(0, std::atoll(v));
  int64_t comms = int64_t(
      cuda::getNcclCommunicatorNames(plan, getMeshPosition(plan, rank))
          .size());
  return (64 + perComm * comms) * 1024 * 1024;
}

/// Refuses a run whose ranks on one GPU need more than its free memory,
/// before anything is allocated.
Status checkDeviceMemory(MpiCommunicator &world, const Plan &plan,
                         Device &device, const cuda::Placement &placement,
                         bool nccl) {
  MemoryNeed mine = reference
                        ? getReferenceMemoryNeed(plan.model, plan.precision)
                        : getDeviceMemoryNeed(plan, world.rank());
  if (nccl && !reference)
    mine.bytes += getNcclAllowance(plan, world.rank());
  int64_t need = mine.bytes;
  if (world.size() > 1) {
    // The ranks sharing this rank's GPU: same host, same GPU UUID.
    MPI_Comm node = MPI_COMM_NULL, gpu = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world.rank(),
                        MPI_INFO_NULL, &node);
    MPI_Comm_split(node, placement.gpuColor, world.rank(), &gpu);
    MPI_Allreduce(&mine.bytes, &need, 1, MPI_INT64_T, MPI_SUM, gpu);
    MPI_Comm_free(&gpu);
    MPI_Comm_free(&node);
  }
  int64_t limit = memoryLimit >= 0
                      ? int64_t(memoryLimit * 1024.0 * 1024.0 * 1024.0)
                      : device.getFreeBytes();
  MemoryNeed total{mine.parameters, need};
  std::string who = placement.sharing > 1
                        ? "the " + std::to_string(placement.sharing) +
                              " ranks on " + device.describe() + " need"
                        : "rank " + std::to_string(world.rank()) + " needs";
  return checkMemoryNeed(
      total, limit, who,
      memoryLimit >= 0 ? "that --memory-limit allows"
                       : "free on " + device.describe(),
      placement.sharing > 1
          ? "fewer ranks per GPU (more GPUs), a smaller model, or "
            "--memory-limit"
          : "more pipeline devices (each holds fewer layers), a smaller "
            "model, or --memory-limit");
}
#endif

/// The CPU backend: MPI, or MPI with NCCL's rules (--transport nccl).
void openCpuBackend(MpiCommunicator &world, const Plan &plan,
                    RankBackend &out) {
  out.device = std::make_unique<CpuDevice>();
  out.comm = &world;
  if (!reference && plan.dp * plan.tp > 1) {
    placeOnMesh(plan, out);
    out.comm = out.hostGroups[0].get();
    out.replicas = out.hostGroups[1].get();
    out.shards = out.hostGroups[2].get();
  }
  if (!out.device->supports(plan.precision))
    failEverywhere(world, "the " + out.device->describe() +
                              " backend computes in fp32; plan '" + planPath +
                              "' trains in " + plan.precision.getName() +
                              " (compile it with --precision fp32)");
  checkHostMemory(world, plan, out.comm->rank());
  if (transport != "nccl" || reference)
    return;
  MpiCommunicator *hosts[kMeshGroups] = {&world, nullptr, nullptr};
  for (int g = 0; g < kMeshGroups; ++g)
    if (out.hostGroups[g])
      hosts[g] = out.hostGroups[g].get();
  agree(world, NcclEmulation::create(plan,
                                     commOrder == "plan"
                                         ? NcclEmulation::Order::Plan
                                         : NcclEmulation::Order::Global,
                                     commTimeout, hosts, *out.device,
                                     out.emulation));
  for (int g = 0; g < kMeshGroups; ++g)
    out.emulated[g] = out.emulation->takeGroup(MeshGroup(g));
  out.comm = out.emulated[0].get();
  out.replicas = out.emulated[1].get();
  out.shards = out.emulated[2].get();
}

void openBackend(MpiCommunicator &world, const Plan &plan, RankBackend &out) {
  if (backendName == "cpu")
    return openCpuBackend(world, plan, out);
#if SLUICE_HAVE_CUDA
  cuda::Placement placement;
  agree(world, cuda::placeRank(world, placement));
  if (placement.empty())
    agree(world, Status::error("--backend cuda: this host has no usable GPU "
                               "(no device, or no driver)"));
  agree(world, cuda::openDevice(placement, out.device));
  // The reference runs the whole model in this one process: it sends
  // nothing.
  std::string chosen = reference ? std::string("mpi") : std::string(transport);
  bool nccl = chosen == "nccl" ||
              (chosen == "auto" &&
               (placement.sharing == 1 || cuda::ncclAllowsSharedGpus()));
  agree(world, checkDeviceMemory(world, plan, *out.device, placement, nccl));
  MpiCommunicator *hosts[3] = {&world, nullptr, nullptr};
  if (!reference && plan.dp * plan.tp > 1) {
    placeOnMesh(plan, out);
    for (int g = 0; g < 3; ++g)
      hosts[g] = out.hostGroups[g].get();
  }
  cuda::NcclSettings settings;
  settings.timeoutSeconds = commTimeout;
  agree(world, cuda::openCommunicators(world, *out.device, placement, plan,
                                       hosts, chosen, settings, out.gpu));
  out.comm = out.gpu.groups[0].get();
  out.replicas = out.gpu.groups[1].get();
  out.shards = out.gpu.groups[2].get();
  if (world.rank() == 0)
    std::printf("backend: %s, %s, %s transport, %d rank(s) per GPU\n",
                out.device->describe().c_str(), plan.precision.getName(),
                out.gpu.chosen.c_str(), placement.sharing);
#else
  failEverywhere(world, "this sluice-run was built without the CUDA backend "
                        "(nvcc was not found when it was configured); use "
                        "--backend cpu");
#endif
}
/// Everything about the flags that can be wrong before the plan is read,
/// checked the same way on every rank, so the job ends with one message.
void checkFlags(Communicator &world) {
  // SLUICE_TRANSPORT gives --transport's default (the test suite runs
  // every multi-rank test under the NCCL emulation this way).
  if (transport.getNumOccurrences() == 0)
    if (const char *fromEnv = std::getenv("SLUICE_TRANSPORT"); fromEnv && *fromEnv)
      transport = std::string(fromEnv);
  if (backendName != "cpu" && backendName != "cuda")
    failEverywhere(world, "unknown --backend '" + backendName +
                              "' (expected cpu or cuda)");
  if (transport != "auto" && transport != "nccl" && transport != "mpi")
    failEverywhere(world, "unknown --transport '" + transport +
                              "' (expected auto, nccl or mpi)");
  if (commOrder != "global" && commOrder != "plan")
    failEverywhere(world, "unknown --comm-order '" + commOrder +
                              "' (expected global or plan)");
  if (commOrder == "plan" && backendName == "cuda")
    failEverywhere(world, "--comm-order plan is for studying orders on the "
                          "CPU backend (--backend cpu --transport nccl); the "
                          "cuda backend issues in the global order");
  if (!(commTimeout > 0))
    failEverywhere(world, "--comm-timeout must be positive, got " +
                              std::to_string(commTimeout));
  if (steps < 1)
    failEverywhere(world, "--steps must be positive, got " +
                              std::to_string(int64_t(steps)));
  if (!dumpGrads.empty() && !checkAgainst.empty())
    failEverywhere(world,
                   "--dump-grads and --check-against exclude each other");
  if (LearningRateSchedule::Decay d;
      !LearningRateSchedule::parseDecay(lrDecay, d))
    failEverywhere(world, "unknown --lr-decay '" + lrDecay +
                              "' (expected none, linear or cosine)");
  if (logEvery < 1)
    failEverywhere(world, "--log-every must be positive, got " +
                              std::to_string(int64_t(logEvery)));
  if (saveEvery < 0 || (saveEvery > 0 && saveDir.empty()))
    failEverywhere(world, "--save-every needs --save DIR and a positive "
                          "step count");
  if (evalEvery < 0 || evalSteps < 0)
    failEverywhere(world, "--eval-every and --eval-steps must not be "
                          "negative");
  if (evalEvery > 0 && dataPath.empty())
    failEverywhere(world, "--eval-every needs --data: synthetic tokens have "
                          "no held-out part");
  if (!(valFraction > 0 && valFraction < 1))
    failEverywhere(world, "--val-fraction must be between 0 and 1, got " +
                              std::to_string(valFraction));
  if (keepCheckpoints < 1)
    failEverywhere(world, "--keep-checkpoints must be at least 1, got " +
                              std::to_string(int(keepCheckpoints)));
  if (loadStep >= 0 && loadDir.empty())
    failEverywhere(world, "--load-step needs --load DIR");
  if (!(peakTflops >= 0))
    failEverywhere(world, "--peak-tflops must not be negative");
  if (!loadHF.empty() && !loadDir.empty())
    failEverywhere(world, "--load-hf and --load exclude each other: a "
                          "checkpoint holds the weights already");
  if (profileSlices && profilePath.empty())
    failEverywhere(world, "--profile-slices needs --profile FILE");
  for (auto [flag, used] : {std::pair{"--trace", !tracePath.empty()},
                            std::pair{"--timing", bool(timing)},
                            std::pair{"--profile", !profilePath.empty()}})
    if (reference && used)
      failEverywhere(world, std::string(flag) +
                                " times the pipelined run's passes; "
                                "--reference runs none");
}

/// Takes `flag`'s value into `field`, unless a resumed run recorded one
/// and the flag is not on the command line; a flag that changes what the
/// checkpoint recorded is named in `changed`.
template <class T, class V>
void takeSetting(const cl::opt<T> &flag, V &field, const V *recorded,
                 std::vector<std::string> &changed) {
  field = V(flag.getValue());
  if (!recorded)
    return;
  if (flag.getNumOccurrences() == 0)
    field = *recorded;
  else if (field != *recorded)
    changed.push_back("--" + flag.ArgStr.str());
}

/// The run's optimizer settings and seed: each flag given, else what the
/// checkpoint being resumed recorded (so a resumed run continues the
/// interrupted one's schedule), else the flag's default.
TrainingSettings resolveSettings(MpiCommunicator &world) {
  std::optional<TrainingSettings> saved;
  if (!loadDir.empty()) {
    CheckpointManifest manifest;
    agree(world, readCheckpointManifest(loadDir, loadStep, manifest));
    saved = manifest.settings;
  }
  const TrainingSettings *r = saved ? &*saved : nullptr;
  TrainingSettings t;
  std::vector<std::string> changed;
  takeSetting(learningRate, t.schedule.peak, r ? &r->schedule.peak : nullptr,
              changed);
  takeSetting(weightDecay, t.adam.weightDecay,
              r ? &r->adam.weightDecay : nullptr, changed);
  takeSetting(warmupSteps, t.schedule.warmup,
              r ? &r->schedule.warmup : nullptr, changed);
  takeSetting(minLearningRate, t.schedule.minimum,
              r ? &r->schedule.minimum : nullptr, changed);
  takeSetting(clipGrad, t.clipNorm, r ? &r->clipNorm : nullptr, changed);
  takeSetting(seed, t.seed, r ? &r->seed : nullptr, changed);
  LearningRateSchedule::parseDecay(lrDecay, t.schedule.decay);
  if (r && lrDecay.getNumOccurrences() == 0)
    t.schedule.decay = r->schedule.decay;
  else if (r && t.schedule.decay != r->schedule.decay)
    changed.push_back("--lr-decay");
  // The decay ends with this run unless told otherwise, or recorded.
  t.schedule.decaySteps = lrDecaySteps > 0 ? int64_t(lrDecaySteps)
                          : r              ? r->schedule.decaySteps
                                           : int64_t(steps);
  if (r && lrDecaySteps > 0 && t.schedule.decaySteps != r->schedule.decaySteps)
    changed.push_back("--lr-decay-steps");
  // The held-out share decides which tokens train: kept from the
  // checkpoint unless validation is asked for again.
  t.heldOut = evalEvery > 0 ? double(valFraction) : 0.0;
  if (r && evalEvery == 0 && valFraction.getNumOccurrences() == 0)
    t.heldOut = r->heldOut;
  else if (r && t.heldOut != r->heldOut)
    changed.push_back("--eval-every/--val-fraction (the held-out share " +
                      std::to_string(r->heldOut) + " -> " +
                      std::to_string(t.heldOut) +
                      ", so other tokens train)");
  if (r) { // constants no flag sets
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
  if (t.schedule.warmup < 0 || lrDecaySteps < 0)
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
  if (t.schedule.decay != LearningRateSchedule::Decay::None && !loadDir.empty() &&
      !r && lrDecaySteps == 0)
    failEverywhere(world, "a resumed run with --lr-decay needs "
                          "--lr-decay-steps: the step the whole training "
                          "run's decay ends, which this run alone does not "
                          "know (its checkpoint records no settings)");
  if (world.rank() == 0 && !changed.empty()) {
    std::string list;
    for (const std::string &flag : changed)
      list += (list.empty() ? "" : ", ") + flag;
    std::fprintf(stderr,
                 "sluice-run: note: %s override%s what checkpoint '%s' "
                 "recorded\n",
                 list.c_str(), changed.size() == 1 ? "s" : "",
                 loadDir.c_str());
  }
  return t;
}

/// Reads the plan and checks it against this job: the rank count, the
/// transport's tag limit, and the precision asked for.
void loadJobPlan(MpiCommunicator &world, Plan &plan) {
  agree(world, loadPlan(planPath, plan));
  if (reference && world.size() != 1)
    failEverywhere(world, "--reference runs in one process; start it without "
                          "mpirun (got " +
                              std::to_string(world.size()) + " ranks)");
  if (!reference && plan.getRanks() != world.size())
    failEverywhere(world,
                   "plan '" + planPath + "' is for " +
                       (plan.dp * plan.tp == 1
                            ? std::to_string(plan.devices) + " devices"
                            : std::to_string(plan.getRanks()) + " ranks (pp " +
                                  std::to_string(plan.devices) + " x tp " +
                                  std::to_string(plan.tp) + " x dp " +
                                  std::to_string(plan.dp) + ")") +
                       ", but " + std::to_string(world.size()) +
                       " ranks were started (mpirun -np " +
                       std::to_string(plan.getRanks()) + ")");
  for (const DeviceProgram &program : plan.programs)
    for (const Instruction &instr : program.instructions)
      if (instr.op != Op::Exec && instr.key > world.maxTag())
        failEverywhere(world, "message key " + std::to_string(instr.key) +
                                  " exceeds the MPI tag limit " +
                                  std::to_string(world.maxTag()));
  // Every rank issues the step's instructions in one global communication
  // order (CommOrder.h): what NCCL needs, and harmless over MPI.
  if (!reference && commOrder == "global") {
    if (Status st = applyCommunicationOrder(plan); !st)
      failEverywhere(world, "plan '" + planPath + "': " + st.message());
    // What the order guarantees, checked (cheap beside a step).
    if (Status st = checkSerializedOrder(plan); !st)
      failEverywhere(world, "plan '" + planPath +
                                "': internal error in the communication "
                                "order: " +
                                st.message());
  }
  if (!precisionName.empty()) {
    Precision run;
    if (!Precision::parse(precisionName, run))
      failEverywhere(world, "unknown --precision '" + precisionName +
                                "' (expected bf16 or fp32)");
    if (Status st = plan.setPrecision(run); !st)
      failEverywhere(world, st.message());
  }
}

/// The tokens this rank trains on -- --data or synthetic ones -- and
/// validates on (--eval-every), each data-parallel replica its own
/// microbatches of a step. Rank 0 says what --data holds.
std::unique_ptr<SwitchedTokens> openTokens(MpiCommunicator &world,
                                           const Plan &plan,
                                           const RankBackend &backend,
                                           uint64_t dataSeed, double heldOut,
                                           bool root) {
  std::unique_ptr<TokenSource> train, validation;
  int64_t vocab = plan.model.layers.front().vocab;
  // A step is every replica's microbatches; each replica reads its own.
  int64_t stepMicrobatches = int64_t(plan.microbatches) * plan.dp;
  if (dataPath.empty()) {
    train = makeSyntheticTokens(dataSeed, vocab, stepMicrobatches);
  } else {
    DataOptions o;
    o.path = dataPath;
    o.rawDtype = dataDtype;
    o.vocab = vocab;
    o.seqLen = plan.model.seqLen;
    o.microbatches = stepMicrobatches;
    o.seed = dataSeed;
    o.validationFraction = heldOut;
    DataSummary summary;
    agree(world, openTokenData(o, train, validation, summary));
    if (root) {
      std::printf("data %s: %lld document%s, %lld training tokens",
                  dataPath.c_str(), (long long)summary.documents,
                  summary.documents == 1 ? "" : "s",
                  (long long)summary.trainTokens);
      if (summary.validationTokens > 0)
        std::printf(", %lld held out for validation",
                    (long long)summary.validationTokens);
      if (!summary.tokenizer.empty())
        std::printf(" (%s)", summary.tokenizer.c_str());
      std::printf("\n");
    }
    if (summary.validationTokens > 0 && evalSteps == 0) {
      int64_t sequences = (summary.validationTokens - 1) / plan.model.seqLen;
      int64_t perStep = stepMicrobatches * plan.model.microBatch;
      // Whole steps only, so no sequence counts twice.
      evalSteps = std::clamp<int64_t>(sequences / perStep, 1, 32);
    }
  }
  if (!reference && plan.dp > 1) {
    train = makeReplicaTokens(std::move(train), backend.replica,
                              plan.microbatches);
    if (validation)
      validation = makeReplicaTokens(std::move(validation), backend.replica,
                                     plan.microbatches);
  }
  return std::make_unique<SwitchedTokens>(std::move(train),
                                          std::move(validation));
}

/// The mean loss over --eval-steps steps of validation batches (always
/// the same ones), their gradients discarded.
double evaluate(Communicator &comm, Trainer &trainer, SwitchedTokens &data) {
  data.setValidating(true);
  double sum = 0;
  for (int64_t k = 0; k < evalSteps; ++k) {
    double loss = 0;
    if (Status st = trainer.runStep(k, loss); !st)
      failRun(comm, st.message());
    if (Status st = trainer.finalizeGradients(); !st)
      failRun(comm, st.message());
    trainer.getParameters().zeroGrads();
    sum += loss;
  }
  data.setValidating(false);
  return sum / double(evalSteps);
}

/// What a run's steps leave for the reports after them.
struct RunResult {
  std::vector<double> losses, gradNorms;
  /// The gradient furthest from --check-against's, relatively.
  double worstGrad = 0;
  std::string worstName;
};

/// Runs --steps steps after `done`: the step, the gradients (dumped or
/// compared after the first), the gradient norm and clipping, the
/// progress line, the optimizer, and `checkpoint` every --save-every
/// steps but the last.
RunResult train(Communicator &comm, Trainer &trainer, SwitchedTokens &data,
                const Plan &plan, const TrainingSettings &settings,
                int64_t done, bool root, double peakFlops,
                const std::function<void(int64_t)> &checkpoint) {
  RunResult result;
  ProgressLog progress;
  if (root) {
    ProgressLog::Setup setup;
    setup.firstStep = done;
    setup.lastStep = done + steps;
    setup.logEvery = logEvery;
    double sequences =
        double(plan.microbatches) * double(plan.dp) * double(plan.model.microBatch);
    setup.tokensPerStep = sequences * double(plan.model.seqLen);
    setup.flopsPerStep = sequences * getTrainingFlopsPerSequence(plan.model);
    setup.peakFlops = peakFlops * double(reference ? 1 : plan.getRanks());
    setup.metricsPath = metricsPath;
    if (Status st = progress.open(setup); !st)
      failRun(comm, st.message());
  }
  for (int64_t s = 0; s < steps; ++s) {
    auto start = std::chrono::steady_clock::now();
    int64_t step = done + s; // 0-based data step; optimizer step is +1
    double loss = 0, norm = 0;
    if (Status st = trainer.runStep(step, loss); !st)
      failRun(comm, st.message());
    if (Status st = trainer.finalizeGradients(); !st)
      failRun(comm, st.message());
    if (s == 0 && !dumpGrads.empty())
      if (Status st = dumpGradients(dumpGrads, trainer.getParameters()); !st)
        failRun(comm, st.message());
    if (s == 0 && !checkAgainst.empty())
      if (Status st = compareGradients(checkAgainst, trainer.getParameters(),
                                       result.worstGrad, result.worstName);
          !st)
        failRun(comm, st.message());
    if (Status st = trainer.gradientNorm(norm); !st)
      failRun(comm, st.message());
    // Every rank has the same norm: all stop, the weights untouched.
    if (!std::isfinite(norm) || !std::isfinite(loss)) {
      if (root)
        std::fprintf(stderr,
                     "sluice-run: error: step %lld diverged (loss %g, "
                     "gradient norm %g): the weights are left as they were; "
                     "lower --lr, or set --clip-grad\n",
                     (long long)(step + 1), loss, norm);
      MPI_Finalize();
      std::exit(1);
    }
    result.losses.push_back(loss);
    result.gradNorms.push_back(norm);
    float clipScale = getClipScale(norm, settings.clipNorm);
    if (Status st = trainer.applyOptimizer(step + 1, clipScale); !st)
      failRun(comm, st.message());
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    if (root)
      if (Status st = progress.record(step + 1, loss,
                                      settings.schedule.at(step + 1), norm,
                                      clipScale, seconds);
          !st)
        failRun(comm, st.message());
    if (data.hasValidation() && evalEvery > 0 &&
        ((step + 1) % evalEvery == 0 || s + 1 == steps)) {
      double validationLoss = evaluate(comm, trainer, data);
      int64_t tokens = evalSteps * plan.microbatches * plan.dp *
                       plan.model.microBatch * plan.model.seqLen;
      if (root)
        if (Status st = progress.evaluation(step + 1, validationLoss, tokens);
            !st)
          failRun(comm, st.message());
    }
    if (saveEvery > 0 && (step + 1) % saveEvery == 0 && s + 1 < steps)
      checkpoint(step + 1);
  }
  if (root && steps > 1)
    progress.finish();
  return result;
}

/// --check-against: every rank's worst tensor reaches rank 0, which
/// compares the losses too and judges the run. The exit code.
int judgeRun(MpiCommunicator &world, Communicator &comm, const RunResult &run) {
  std::vector<std::string> reports;
  std::ostringstream mine;
  mine.precision(3);
  mine << std::scientific << run.worstGrad << " " << run.worstName;
  // Over the world: every replica's gradients are judged.
  if (Status st = world.gatherToRoot(mine.str(), reports); !st)
    failRun(comm, st.message());
  if (world.rank() != 0)
    return 0;
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
      worstOver(checkAgainst + "/losses.txt", run.losses, compared);
  double normWorst = worstOver(checkAgainst + "/grad-norms.txt", run.gradNorms,
                               normsCompared);
  std::printf("check against %s: loss max relative error %.2e over %zu "
              "steps (tolerance %.0e); gradient norm max relative error "
              "%.2e (the same); gradients max relative error %.2e in %s (tolerance "
              "%.0e)\n",
              checkAgainst.c_str(), lossWorst, compared, double(lossTolerance),
              normWorst, gradWorst, gradName.c_str(), double(gradTolerance));
  if (compared == 0) {
    std::fprintf(stderr,
                 "sluice-run: error: '%s' has no losses to compare with\n",
                 checkAgainst.c_str());
    return 1;
  }
  // The norms, like the losses, are a trajectory: they drift alike.
  if (lossWorst > lossTolerance || gradWorst > gradTolerance ||
      normWorst > lossTolerance) {
    std::fprintf(stderr,
                 "sluice-run: error: the run differs from '%s' beyond "
                 "tolerance\n",
                 checkAgainst.c_str());
    return 1;
  }
  return 0;
}

/// --save: the replicas hold the same parameters, so the first one writes
/// them, a file per device and shard. A sharded optimizer state (ZeRO-1)
/// is gathered whole on every replica first.
void saveRun(MpiCommunicator &world, Communicator &comm, Trainer &trainer,
             const RankBackend &backend, const TrainingSettings &settings,
             int64_t stepsDone) {
  if (Status st = trainer.gatherOptimizerState(); !st)
    failRun(comm, st.message());
  if (backend.replica == 0)
    if (Status st = saveCheckpoint(saveDir, stepsDone, trainer.getParameters(),
                                   backend.model ? *backend.model : comm,
                                   settings, keepCheckpoints);
        !st)
      failRun(comm, st.message());
  if (backend.model)
    world.barrier();
  if (world.rank() == 0) {
    std::printf("saved checkpoint %s (step %lld)\n", saveDir.c_str(),
                (long long)stepsDone);
    std::fflush(stdout);
  }
}

/// --save-hf: the first replica's ranks gather their parameters to rank 0,
/// which writes the directory.
void saveHuggingFaceRun(MpiCommunicator &world, Communicator &comm,
                        Trainer &trainer, const RankBackend &backend,
                        const Plan &plan, int64_t stepsDone) {
  if (Status st = trainer.gatherOptimizerState(); !st)
    failRun(comm, st.message());
  if (backend.replica == 0)
    if (Status st = saveHuggingFace(saveHF, loadHF, plan.model, stepsDone,
                                    trainer.getParameters(),
                                    backend.model ? *backend.model : comm);
        !st)
      failRun(comm, st.message());
  if (backend.model)
    world.barrier();
  if (world.rank() == 0)
    std::printf("saved %s (Hugging Face, step %lld)\n", saveHF.c_str(),
                (long long)stepsDone);
}

/// --profile: every rank's measured pass times, merged by rank 0.
void writeProfile(Communicator &comm, Executor &executor, const Plan &plan,
                  bool root) {
  std::vector<std::string> parts;
  if (Status st = comm.gatherToRoot(profileJson(executor, plan, comm), parts);
      !st)
    failRun(comm, st.message());
  if (!root)
    return;
  nlohmann::json profile;
  profile["format"] = "sluice-profile";
  profile["version"] = 1;
  profile["schedule"] = plan.schedule;
  profile["stages"] = nlohmann::json::object();
  for (const std::string &part : parts) {
    nlohmann::json stages = nlohmann::json::parse(part);
    for (auto &[stage, passes] : stages.items())
      profile["stages"][stage] = passes;
  }
  if (Status st = writeFileAtomically(profilePath, profile.dump(2) + "\n"); !st)
    failRun(comm, st.message());
}

/// --trace: Chrome's trace format, one process per rank, one thread per
/// stream, complete events in microseconds from the rank's step start.
void writeTrace(Communicator &comm, Executor &executor, bool root) {
  nlohmann::json events = nlohmann::json::array();
  for (const TraceSpan &span : executor.getTrace())
    events.push_back({{"name", span.name},
                      {"ph", "X"},
                      {"pid", comm.rank()},
                      {"tid", span.stream == "compute"      ? 0
                              : span.stream == "vocabulary" ? 1
                                                            : 2},
                      {"ts", span.start * 1e6},
                      {"dur", (span.end - span.start) * 1e6}});
  std::vector<std::string> parts;
  if (Status st = comm.gatherToRoot(events.dump(), parts); !st)
    failRun(comm, st.message());
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
    for (int tid : {0, 1, 2})
      all.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", rank},
                     {"tid", tid},
                     {"args",
                      {{"name", tid == 0   ? "compute"
                                : tid == 1 ? "vocabulary"
                                           : "data-parallel sums"}}}});
    for (auto &event : nlohmann::json::parse(parts[rank]))
      all.push_back(event);
  }
  if (Status st = writeFileAtomically(tracePath, trace.dump() + "\n"); !st)
    failRun(comm, st.message());
}

/// --timing: where each rank's last step went, printed by rank 0.
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
    failRun(comm, st.message());
  for (const std::string &l : lines)
    std::printf("%s\n", l.c_str());
}
} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  cl::HideUnrelatedOptions(category);
  sluice::setVersionPrinter();
  cl::ParseCommandLineOptions(argc, argv,
                              "sluice-run: train a model with a plan\n");
  MpiCommunicator world;
  checkFlags(world);
  Plan plan;
  loadJobPlan(world, plan);
  RankBackend backend;
  openBackend(world, plan, backend);
  Device &device = *backend.device;
  Communicator &comm = *backend.comm;
  TrainingSettings settings = resolveSettings(world);
  // Rank 0 of the world prints and writes what one file or line says.
  bool root = world.rank() == 0;
  std::unique_ptr<SwitchedTokens> data =
      openTokens(world, plan, backend, settings.seed, settings.heldOut, root);

  TrainerOptions options;
  options.seed = settings.seed;
  options.adam = settings.adam;
  options.schedule = settings.schedule;
  if (world.rank() == failRank) {
    options.failAtInstruction = failAt;
    options.failHang = failHang;
  }
  options.wholeGradients = !dumpGrads.empty() || !checkAgainst.empty();
  options.commTimeout = commTimeout;
  std::unique_ptr<Trainer> trainer;
  Executor *executor = nullptr;
  if (reference) {
    trainer = std::make_unique<ReferenceTrainer>(
        plan.model, plan.microbatches * plan.dp, plan.precision, device, *data,
        options);
  } else {
    auto e = std::make_unique<Executor>(plan, comm.rank(), device, comm, *data,
                                        options, backend.replicas,
                                        backend.shards);
    executor = e.get();
    trainer = std::move(e);
  }
  if (Status st = trainer->prepare(); !st)
    failRun(comm, st.message());
  int64_t done = 0;
  // Each rank loads its own parts: one that fails ends them all.
  if (!loadHF.empty())
    agree(world,
          loadHuggingFace(loadHF, plan.model, trainer->getParameters()));
  if (!loadDir.empty())
    agree(world,
          loadCheckpoint(loadDir, loadStep, trainer->getParameters(), done));
  // ZeRO-1: from here on each replica keeps its part of the moments.
  if (Status st = trainer->shardOptimizerState(); !st)
    failRun(comm, st.message());

  double peakFlops =
      peakTflops > 0 ? peakTflops * 1e12
                     : getKnownPeakFlops(device.describe(),
                                         plan.precision.getName());
  RunResult run = train(comm, *trainer, *data, plan, settings, done, root,
                        peakFlops,
                        [&](int64_t stepsDone) {
                          saveRun(world, comm, *trainer, backend, settings,
                                  stepsDone);
                        });
  int exitCode = 0;
  if (!dumpGrads.empty() && root)
    for (auto [file, values] :
         {std::pair{"/losses.txt", &run.losses},
          std::pair{"/grad-norms.txt", &run.gradNorms}}) {
      std::ostringstream os;
      os.precision(10);
      for (double value : *values)
        os << value << "\n";
      if (Status st = writeFileAtomically(dumpGrads + file, os.str()); !st)
        failRun(comm, st.message());
    }
  if (!checkAgainst.empty())
    exitCode = judgeRun(world, comm, run);
  if (!saveDir.empty())
    saveRun(world, comm, *trainer, backend, settings, done + steps);
  if (!saveHF.empty())
    saveHuggingFaceRun(world, comm, *trainer, backend, plan, done + steps);
  if (executor && !profilePath.empty())
    writeProfile(comm, *executor, plan, root);
  if (executor && !tracePath.empty())
    writeTrace(comm, *executor, root);
  if (executor && timing)
    printTiming(comm, *executor);
  MPI_Finalize();
  return exitCode;
}
