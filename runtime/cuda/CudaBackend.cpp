//===- CudaBackend.cpp - A rank's GPU and its communicators ---------------===//

#include "CudaBackend.h"
#include "CudaDevice.h"
#include "AttentionCudnn.h"
#include "Device.h"
#include "Gemm.h"
#include "StagedCommunicator.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace sluice::rt::cuda {

Status placeRank(HostGroup &world, Placement &out) {
  std::vector<DeviceInfo> devices;
  Status listed = listDevices(devices);
  std::unique_ptr<ProcessGroup> node = world.splitByHost();
  int hostRank = node->rank(), hostRanks = node->size();
  // Every rank of the host takes part in the gather, GPU or not.
  const int idBytes = 16;
  char mine[idBytes] = {};
  int chosen = chooseGpu(hostRank, int(devices.size()));
  if (listed && !devices.empty())
    std::memcpy(mine, devices[chosen].uuid.data(),
                std::min<size_t>(idBytes, devices[chosen].uuid.size()));
  std::vector<char> all(size_t(hostRanks) * idBytes);
  Status gathered = node->allGatherBytes(mine, idBytes, all.data());
  if (!listed)
    return listed;
  if (!gathered)
    return gathered;
  std::vector<std::string> uuids;
  if (!devices.empty())
    for (int r = 0; r < hostRanks; ++r)
      uuids.emplace_back(all.data() + r * idBytes, idBytes);
  out = placeOnGpus(hostRank, chosen, uuids);
  out.hostRanks = hostRanks;
  return Status::ok();
}

Status openDevice(const Placement &placement, std::unique_ptr<Device> &out) {
  std::unique_ptr<CudaDevice> device;
  if (Status st = CudaDevice::open(placement.gpu, device); !st)
    return st;
  out = std::move(device);
  return Status::ok();
}

int getNcclVersion() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess)
    return 0;
  return version;
}

bool ncclAllowsSharedGpus() {
  const char *enabled = std::getenv("NCCL_MULTI_RANK_GPU_ENABLE");
  return getNcclVersion() >= 23000 && enabled && std::string(enabled) == "1";
}

namespace {
std::string versionName(int v) {
  // 2.19 and later: major * 10000 + minor * 100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) +
         "." + std::to_string(v % 100);
}
} // namespace

std::string describeLibraries() {
  Dl_info info{};
  dladdr(reinterpret_cast<void *>(&ncclGetVersion), &info);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  int v = getNcclVersion();
  return "CUDA runtime " + std::to_string(runtime / 1000) + "." +
         std::to_string(runtime % 1000 / 10) + ", driver " +
         std::to_string(driver / 1000) + "." +
         std::to_string(driver % 1000 / 10) + "; " + describeBlasLibrary() +
         "; " + describeDnnLibrary() + "; NCCL " + versionName(v) + " from " +
         (info.dli_fname ? info.dli_fname : "an unknown path");
}

Status openCommunicators(HostGroup &world, Device &device,
                         const Placement &placement, const Plan &plan,
                         HostGroup *hosts[kMeshGroups],
                         const std::string &transport,
                         const NcclSettings &settings, RankComms &out) {
  auto &gpu = static_cast<CudaDevice &>(device);
  // Every rank decides alike: a GPU shared anywhere counts everywhere.
  int64_t anyShared = placement.sharing > 1 ? 1 : 0;
  if (Status st = world.allReduceInts(&anyShared, 1, Reduction::Max); !st)
    return st;
  bool sharable = ncclAllowsSharedGpus();
  if (transport == "nccl" && anyShared && !sharable)
    return Status::error(
        "--transport nccl: " + std::to_string(placement.sharing) +
        " ranks share GPU " + std::to_string(placement.gpu) + "; NCCL " +
        (getNcclVersion() >= 23000
             ? "allows that only with NCCL_MULTI_RANK_GPU_ENABLE=1"
             : versionName(getNcclVersion()) +
                   " refuses it (2.30 and later allow it with "
                   "NCCL_MULTI_RANK_GPU_ENABLE=1)") +
        "; or use --transport mpi");
  bool nccl = transport == "nccl" ||
              (transport == "auto" && (!anyShared || sharable));
  if (!nccl) {
    out.chosen = "mpi (staged through pinned host memory)";
    for (int g = 0; g < kMeshGroups; ++g)
      if (hosts[g])
        out.groups[g] = std::make_unique<StagedCommunicator>(*hosts[g], gpu);
    return Status::ok();
  }
  MeshPosition at = getMeshPosition(plan, world.rank());
  if (Status st = NcclMesh::create(world, gpu, plan, at, hosts, settings,
                                   out.mesh);
      !st)
    return st;
  NcclMesh *mesh = out.mesh.get();
  gpu.setWaitHook([mesh](double waited) { return mesh->check(waited); });
  for (int g = 0; g < kMeshGroups; ++g)
    out.groups[g] = mesh->takeGroup(g);
  out.chosen = "nccl " + versionName(mesh->getVersion()) + ", " +
               std::to_string(mesh->getCount()) + " communicators";
  return Status::ok();
}

} // namespace sluice::rt::cuda
