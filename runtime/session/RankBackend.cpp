//===- RankBackend.cpp - A rank's device and communicators ----------------===//

#include "RankBackend.h"

#include "CpuDevice.h"
#include "Failure.h"
#include "HostMemory.h"
#include "Threads.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace sluice::rt::session {

namespace {

/// The memory limit the options set, in bytes, or `available`.
int64_t getLimit(const SessionOptions &o, int64_t available) {
  return o.memoryLimit >= 0 ? int64_t(o.memoryLimit * 1024.0 * 1024.0 * 1024.0)
                            : available;
}

/// Refuses a run whose ranks on some host need more memory than it has
/// (or than the memory limit), before anything is allocated: the kernel
/// would otherwise kill a rank half-way through the first step.
void checkHostMemory(ProcessGroup &comm, const Plan &plan,
                     const SessionOptions &o, int device) {
  MemoryNeed mine = o.reference
                        ? getReferenceMemoryNeed(plan.model, plan.precision)
                        : getDeviceMemoryNeed(plan, device);
  MemoryNeed host = mine;
  int hostRanks = 1, hostRank = 0;
  if (comm.size() > 1) {
    std::unique_ptr<ProcessGroup> node = comm.splitByHost();
    hostRanks = node->size();
    hostRank = node->rank();
    int64_t totals[2] = {mine.parameters, mine.bytes};
    if (Status st = node->allReduceInts(totals, 2, Reduction::Sum); !st)
      failHere(st.message());
    host.parameters = totals[0];
    host.bytes = totals[1];
  }
  std::string who =
      o.reference ? std::string("the reference needs")
      : hostRanks == 1
          ? "rank " + std::to_string(comm.rank()) + " needs"
          : "the " + std::to_string(hostRanks) + " ranks on this host need";
  // What helps depends on where the memory goes: ranks sharing a host
  // hold the whole model between them (and each its own activations), so
  // more ranks on it need more, not less.
  std::string advice =
      o.reference ? "a smaller model (--seq-len, --micro-batch at compile "
                    "time), or --memory-limit"
      : hostRanks == comm.size() && hostRanks > 1
          ? "more ranks on one host need more memory, not less: spread "
            "them over more hosts (mpirun --hostfile), or compile a "
            "smaller model (--seq-len, --micro-batch), or set --memory-limit"
          : "more pipeline devices (each holds fewer layers), ranks spread "
            "over more hosts, a smaller model, or --memory-limit";
  Status st = checkMemoryNeed(host, getLimit(o, getAvailableHostBytes()), who,
                              o.memoryLimit >= 0 ? "that --memory-limit allows"
                                                 : "available on this host",
                              advice);
  int64_t failed = st ? 0 : 1, anyFailed = failed;
  if (comm.size() > 1)
    if (Status reduced = comm.allReduceInts(&anyFailed, 1, Reduction::Max);
        !reduced)
      failHere(reduced.message());
  if (!anyFailed)
    return;
  // One line per failing host, from its first rank.
  throw SessionEnd{
      Outcome::everywhere(failed && hostRank == 0 ? st.message() : "")};
}

/// Where this rank sits in the plan's mesh: ranks are numbered with the
/// tensor-parallel index fastest, then the context-parallel rank, then the
/// data-parallel replica, then the pipeline device (Megatron-LM's order: a
/// node holds whole TP groups). Splits the world into this rank's pipeline
/// (same replica, context rank and shard), the ranks summing its gradients
/// (same device and shard), its tensor-parallel group (same device,
/// replica and context rank), its expert group (same device, shard and
/// context rank, ep consecutive replicas), the ranks holding its experts
/// (every ep-th replica's context-parallel ranks),
/// its context-parallel group (same device, replica and shard) and the
/// ranks that write a checkpoint with it.
void placeOnMesh(HostGroup &world, const Plan &plan, RankBackend &out) {
  int rank = world.rank();
  int tp = plan.tp, dp = plan.dp, ep = plan.ep, cp = plan.cp;
  MeshPosition at = getMeshPosition(plan, rank);
  int device = at.device, replica = at.replica, shard = at.shard,
      context = at.context;
  // A split is collective over the world: every rank makes all seven.
  out.hostGroups[0] =
      world.splitHostGroup((replica * cp + context) * tp + shard, device);
  out.hostGroups[1] = world.splitHostGroup(device * tp + shard,
                                           at.getGradientRank(plan));
  out.replica = replica;
  out.context = context;
  out.hostGroups[2] =
      world.splitHostGroup((device * dp + replica) * cp + context, shard);
  // An expert group is ep replicas at the same context rank (each sends
  // its own tokens); the ranks holding the same experts span the context
  // ranks, which sum alike gradients (docs/moe.md).
  out.hostGroups[3] = world.splitHostGroup(
      ((device * tp + shard) * (dp / ep) + replica / ep) * cp + context,
      replica % ep);
  out.hostGroups[4] = world.splitHostGroup(
      (device * tp + shard) * ep + replica % ep, (replica / ep) * cp + context);
  out.hostGroups[5] =
      world.splitHostGroup((device * dp + replica) * tp + shard, context);
  // The ranks that write a checkpoint together: the first replica's, or
  // under expert parallelism the first expert group's (by member, then
  // device and shard); of its context-parallel ranks, the first's (which
  // hold the same weights as the others).
  out.model = world.splitHostGroup(
      (replica / ep) * cp + context,
      (replica % ep) * plan.devices * tp + device * tp + shard);
  if (dp * cp == 1)
    out.hostGroups[1].reset();
  if (cp == 1)
    out.hostGroups[5].reset();
  if (tp == 1)
    out.hostGroups[2].reset();
  if (ep == 1)
    out.hostGroups[3].reset();
  if (ep == 1 || plan.getExpertReplicas() == 1)
    out.hostGroups[4].reset();
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
      cuda::getNcclCommunicatorNames(plan, getMeshPosition(plan, rank)).size());
  return (64 + perComm * comms) * 1024 * 1024;
}

/// Refuses a run whose ranks on one GPU need more than its free memory,
/// before anything is allocated.
Status checkDeviceMemory(HostGroup &world, const Plan &plan,
                         const SessionOptions &o, Device &device,
                         const cuda::Placement &placement, bool nccl) {
  MemoryNeed mine = o.reference
                        ? getReferenceMemoryNeed(plan.model, plan.precision)
                        : getDeviceMemoryNeed(
                              plan, getMeshPosition(plan, world.rank()).device);
  if (nccl && !o.reference)
    mine.bytes += getNcclAllowance(plan, world.rank());
  mine.bytes += getFp8WeightCopyBytes(
      plan,
      o.reference ? -1 : getMeshPosition(plan, world.rank()).device);
  int64_t need = mine.bytes;
  if (world.size() > 1) {
    // The ranks sharing this rank's GPU: same host, same GPU UUID.
    std::unique_ptr<ProcessGroup> node = world.splitByHost();
    std::unique_ptr<ProcessGroup> gpu =
        node->splitGroup(placement.gpuColor, world.rank());
    if (Status st = gpu->allReduceInts(&need, 1, Reduction::Sum); !st)
      return st;
  }
  MemoryNeed total{mine.parameters, need};
  std::string who = placement.sharing > 1
                        ? "the " + std::to_string(placement.sharing) +
                              " ranks on " + device.describe() + " need"
                        : "rank " + std::to_string(world.rank()) + " needs";
  return checkMemoryNeed(
      total, getLimit(o, device.getFreeBytes()), who,
      o.memoryLimit >= 0 ? "that --memory-limit allows"
                         : "free on " + device.describe(),
      placement.sharing > 1
          ? "fewer ranks per GPU (more GPUs), a smaller model, or "
            "--memory-limit"
          : "more pipeline devices (each holds fewer layers), a smaller "
            "model, or --memory-limit");
}

/// The CUDA backend: a GPU by UUID, NCCL or staged MPI.
void openCudaBackend(HostGroup &world, const Plan &plan,
                     const SessionOptions &o, RankBackend &out) {
  cuda::Placement placement;
  agree(world, cuda::placeRank(world, placement));
  if (placement.empty())
    agree(world, Status::error("--backend cuda: this host has no usable GPU "
                               "(no device, or no driver)"));
  agree(world, cuda::openDevice(placement, out.device));
  // The reference runs the whole model in this one process: it sends
  // nothing.
  std::string chosen = o.reference ? std::string("mpi") : o.transport;
  bool nccl = chosen == "nccl" ||
              (chosen == "auto" &&
               (placement.sharing == 1 || cuda::ncclAllowsSharedGpus()));
  agree(world, checkDeviceMemory(world, plan, o, *out.device, placement, nccl));
  HostGroup *hosts[kMeshGroups] = {&world};
  if (!o.reference && plan.dp * plan.cp * plan.tp > 1) {
    placeOnMesh(world, plan, out);
    for (int g = 0; g < kMeshGroups; ++g)
      hosts[g] = out.hostGroups[g].get();
  }
  cuda::NcclSettings settings;
  settings.timeoutSeconds = o.commTimeout;
  agree(world, cuda::openCommunicators(world, *out.device, placement, plan,
                                       hosts, chosen, settings, out.gpu));
  out.comm = out.gpu.groups[0].get();
  out.replicas = out.gpu.groups[1].get();
  out.shards = out.gpu.groups[2].get();
  out.experts = out.gpu.groups[3].get();
  out.expertReplicas = out.gpu.groups[4].get();
  out.contexts = out.gpu.groups[5].get();
  if (world.rank() == 0) {
    std::printf("backend: %s, %s, %s transport, %d rank(s) per GPU\n",
                out.device->describe().c_str(), plan.precision.getName(),
                out.gpu.chosen.c_str(), placement.sharing);
    std::printf("libraries: %s\n", cuda::describeLibraries().c_str());
  }
}
#endif

/// The CPU backend: MPI, or MPI with NCCL's rules (--transport nccl).
/// --threads, or what the host offers this rank: OpenBLAS's own variable
/// when the user set it (a benchmark pinning one thread), else the cores
/// over the ranks Open MPI started here (each rank its share, so ranks'
/// threads do not fight over cores).
int resolveThreads(const SessionOptions &o) {
  if (o.threads > 0)
    return o.threads;
  auto number = [](const char *name) {
    const char *value = std::getenv(name);
    return value ? std::atoi(value) : 0;
  };
  if (int blas = number("OPENBLAS_NUM_THREADS"); blas > 0)
    return blas;
  int local = std::max(1, number("OMPI_COMM_WORLD_LOCAL_SIZE"));
  int cores = int(std::thread::hardware_concurrency());
  return std::max(1, cores / local);
}

void openCpuBackend(HostGroup &world, const Plan &plan,
                    const SessionOptions &o, RankBackend &out) {
  out.device = std::make_unique<CpuDevice>();
  out.comm = &world;
  if (!o.reference && plan.dp * plan.cp * plan.tp > 1) {
    placeOnMesh(world, plan, out);
    out.comm = out.hostGroups[0].get();
    out.replicas = out.hostGroups[1].get();
    out.shards = out.hostGroups[2].get();
    out.experts = out.hostGroups[3].get();
    out.expertReplicas = out.hostGroups[4].get();
    out.contexts = out.hostGroups[5].get();
  }
  if (!out.device->supports(plan.precision))
    failEverywhere(world, "the " + out.device->describe() +
                              " backend computes in fp32; plan '" + o.planPath +
                              "' trains in " + plan.precision.getName() +
                              " (compile it with --precision fp32)");
  checkHostMemory(world, plan, o, out.comm->rank());
  out.threads = resolveThreads(o);
  cpu::setThreads(out.threads);
  if (o.transport != "nccl" || o.reference)
    return;
  // The emulation holds MPI to NCCL's rules: it runs over MPI groups.
  MpiCommunicator *hosts[kMeshGroups] = {dynamic_cast<MpiCommunicator *>(&world),
                                         nullptr, nullptr};
  for (int g = 0; g < kMeshGroups; ++g)
    if (out.hostGroups[g])
      hosts[g] = dynamic_cast<MpiCommunicator *>(out.hostGroups[g].get());
  if (!hosts[0])
    failEverywhere(world, "--backend cpu --transport nccl emulates NCCL over "
                          "MPI; this job's ranks do not meet through MPI");
  agree(world, NcclEmulation::create(
                   plan,
                   o.commOrder == "plan" ? NcclEmulation::Order::Plan
                                         : NcclEmulation::Order::Global,
                   o.commTimeout, hosts, *out.device, out.emulation));
  for (int g = 0; g < kMeshGroups; ++g)
    out.emulated[g] = out.emulation->takeGroup(MeshGroup(g));
  out.comm = out.emulated[0].get();
  out.replicas = out.emulated[1].get();
  out.shards = out.emulated[2].get();
  out.experts = out.emulated[3].get();
  out.expertReplicas = out.emulated[4].get();
  out.contexts = out.emulated[5].get();
}

} // namespace

std::vector<Kernels::Id> getKernelsNeeded(const Plan &plan) {
  using Id = Kernels::Id;
  bool shards = plan.vocabulary.any();
  bool capped = plan.model.finalSoftcap > 0;
  std::vector<Kernels::Id> needed;
  for (int k = 0; k < Kernels::kCount; ++k) {
    Id id = Id(k);
    switch (id) {
    case Id::gemmFp8:
    case Id::updateFp8Scales:
      if (!plan.precision.fp8Gemms)
        continue;
      break;
    case Id::softcap:
    case Id::softcapGrad:
      if (!capped)
        continue;
      break;
    case Id::shardLookup:
    case Id::shardScatterAdd:
    case Id::shardSoftmaxStatistics:
    case Id::rescaleSum:
    case Id::scaleRows:
    case Id::shardLoss:
    case Id::shardSoftmaxGrad:
    case Id::labelRows:
    case Id::combineGrad:
      if (!shards)
        continue;
      break;
    case Id::crossEntropyForward:
    case Id::crossEntropyBackward:
      if (plan.vocabulary.output.present)
        continue;
      break;
    case Id::embeddingForward:
    case Id::embeddingBackward:
      if (plan.vocabulary.input.present)
        continue;
      break;
    default:
      break;
    }
    needed.push_back(id);
  }
  return needed;
}

std::string findUnsupportedKernel(const Plan &plan, const Kernels &kernels) {
  for (Kernels::Id id : getKernelsNeeded(plan))
    if (!kernels.supports(id, plan.precision))
      return std::string(Kernels::getName(id)) + " (" +
             plan.precision.getName() + ")";
  return "";
}

void openBackend(HostGroup &world, const Plan &plan,
                 const SessionOptions &options, RankBackend &out) {
  if (options.backend == "cpu") {
    openCpuBackend(world, plan, options, out);
  } else {
#if SLUICE_HAVE_CUDA
    openCudaBackend(world, plan, options, out);
#else
    failEverywhere(world, "this build has no CUDA backend (nvcc was not "
                          "found when it was configured); use --backend cpu");
#endif
  }
  // Every rank opens the same backend for the same plan: all refuse alike.
  std::string missing =
      findUnsupportedKernel(plan, out.device->getKernels(StreamKind::Compute));
  if (!missing.empty())
    failEverywhere(world, "the " + out.device->describe() +
                              " backend has no kernel " + missing +
                              ", which plan '" + options.planPath + "' needs");
}

} // namespace sluice::rt::session
