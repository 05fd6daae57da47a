//===- Device.cu - CUDA device discovery ----------------------------------===//

#include "CudaCheck.h"
#include "Device.h"

#include <cuda_runtime.h>

#include <sstream>

namespace sluice::rt::cuda {

Status cudaFailure(cudaError_t error, const char *expression, const char *file,
                   int line) {
  std::ostringstream os;
  os << file << ":" << line << ": CUDA error " << cudaGetErrorName(error)
     << " (" << cudaGetErrorString(error) << ") in " << expression;
  return Status::error(os.str());
}

Status listDevices(std::vector<DeviceInfo> &devices) {
  devices.clear();
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  // No GPU or no driver is a fact about the machine, not a failure.
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();
    return Status::ok();
  }
  CUDA_CHECK(error);
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    devices.push_back({index, prop.name, prop.major, prop.minor,
                       prop.multiProcessorCount, prop.totalGlobalMem,
                       std::string(prop.uuid.bytes, sizeof(prop.uuid.bytes))});
  }
  return Status::ok();
}

} // namespace sluice::rt::cuda
