//===- CudaBackend.cpp - A rank's GPU and its communicator ----------------===//

#include "CudaBackend.h"
#include "CudaDevice.h"
#include "Device.h"
#include "NcclCommunicator.h"
#include "StagedCommunicator.h"

#include <mpi.h>

namespace sluice::rt::cuda {

Status placeRank(MpiCommunicator &world, Placement &out) {
  std::vector<DeviceInfo> devices;
  Status listed = listDevices(devices);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world.rank(),
                      MPI_INFO_NULL, &node);
  int hostRank = 0;
  MPI_Comm_rank(node, &hostRank);
  MPI_Comm_size(node, &out.hostRanks);
  MPI_Comm_free(&node);
  if (!listed)
    return listed;
  out.gpus = int(devices.size());
  if (out.gpus == 0)
    return Status::ok();
  out.gpu = hostRank % out.gpus;
  out.gpuRank = hostRank / out.gpus;
  // Round-robin: the first (hostRanks % gpus) GPUs get one rank more.
  out.sharing =
      out.hostRanks / out.gpus + (out.gpu < out.hostRanks % out.gpus ? 1 : 0);
  return Status::ok();
}

Status openDevice(const Placement &placement, std::unique_ptr<Device> &out) {
  std::unique_ptr<CudaDevice> device;
  if (Status st = CudaDevice::open(placement.gpu, device); !st)
    return st;
  out = std::move(device);
  return Status::ok();
}

Status openCommunicator(MpiCommunicator &world, Device &device,
                        const Placement &placement, const Plan &plan,
                        const std::string &transport,
                        std::unique_ptr<Communicator> &out,
                        std::string &chosen) {
  auto &gpu = static_cast<CudaDevice &>(device);
  // Every rank decides alike: NCCL only where no GPU of any host is shared.
  int shared = placement.sharing > 1 ? 1 : 0, anyShared = shared;
  MPI_Allreduce(&shared, &anyShared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  bool nccl = transport == "nccl" || (transport == "auto" && !anyShared);
  if (transport == "nccl" && anyShared)
    return Status::error("--transport nccl needs one rank per GPU, but " +
                         std::to_string(placement.sharing) +
                         " ranks share GPU " + std::to_string(placement.gpu) +
                         " (NCCL refuses two ranks of a communicator on one "
                         "GPU); use --transport mpi");
  if (!nccl) {
    chosen = "mpi (staged through pinned host memory)";
    out = std::make_unique<StagedCommunicator>(world, gpu);
    return Status::ok();
  }
  if (Status st = checkMessageOrder(plan); !st)
    return st;
  chosen = "nccl";
  std::unique_ptr<NcclCommunicator> comm;
  if (Status st = NcclCommunicator::create(world, gpu, getLinks(plan), comm);
      !st)
    return st;
  out = std::move(comm);
  return Status::ok();
}

} // namespace sluice::rt::cuda
