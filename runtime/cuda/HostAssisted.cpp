//===- HostAssisted.cpp - What GPU communicators do through MPI -----------===//

#include "HostAssisted.h"

#include <algorithm>

namespace sluice::rt::cuda {

Status HostAssistedCommunicator::allReduceSum(DevicePtr data, int64_t count,
                                              const int *group, int groupSize,
                                              Stream &stream) {
  int64_t bytes = count * getSize(data.getType());
  std::vector<char> staging(size_t(std::max<int64_t>(bytes, 1)));
  device.download(staging.data(), data, bytes, stream);
  if (Status st = stream.synchronize(); !st)
    return st;
  if (Status st = host.allReduceSum(DevicePtr(staging.data(), data.getType()),
                                    count, group, groupSize, hostStream);
      !st)
    return st;
  device.upload(data, staging.data(), bytes, stream);
  return stream.synchronize();
}

} // namespace sluice::rt::cuda
