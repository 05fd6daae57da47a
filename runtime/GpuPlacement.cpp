//===- GpuPlacement.cpp - Which GPU each rank of a host uses --------------===//

#include "GpuPlacement.h"

#include <algorithm>

namespace sluice::rt {

int chooseGpu(int hostRank, int visible) {
  return visible > 0 ? hostRank % visible : 0;
}

GpuPlacement placeOnGpus(int hostRank, int chosen,
                         const std::vector<std::string> &uuids) {
  GpuPlacement out;
  out.hostRanks = int(uuids.size());
  out.gpu = chosen;
  if (uuids.empty() || hostRank < 0 || hostRank >= int(uuids.size()) ||
      uuids[hostRank].empty())
    return out;
  const std::string &me = uuids[hostRank];
  out.sharing = int(std::count(uuids.begin(), uuids.end(), me));
  out.gpuRank = int(std::count(uuids.begin(), uuids.begin() + hostRank, me));
  std::vector<std::string> distinct;
  for (const std::string &id : uuids)
    if (!id.empty())
      distinct.push_back(id);
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()),
                 distinct.end());
  out.gpus = int(distinct.size());
  out.gpuColor = int(std::find(distinct.begin(), distinct.end(), me) -
                     distinct.begin());
  return out;
}

} // namespace sluice::rt
