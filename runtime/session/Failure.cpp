//===- Failure.cpp - Ending a session from deep inside it -----------------===//

#include "Failure.h"

#include "ProcessGroup.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace sluice::rt::session {

void failEverywhere(const Communicator &world, const std::string &message) {
  throw SessionEnd{
      Outcome::everywhere(world.rank() == 0 ? message : std::string())};
}

namespace {
/// This process's rank in the job, for failHere's messages.
int failureRank = 0;
} // namespace

void setFailureRank(int rank) { failureRank = rank; }

void failHere(const std::string &message) {
  throw SessionEnd{Outcome::thisRank("rank " + std::to_string(failureRank) +
                                     ": " + message)};
}

void agree(HostGroup &world, const Status &st) {
  int64_t failed = st ? 0 : 1, anyFailed = failed;
  if (world.size() > 1)
    if (Status reduced = world.allReduceInts(&anyFailed, 1, Reduction::Max);
        !reduced)
      failHere(reduced.message());
  if (!anyFailed)
    return;
  std::vector<std::string> all;
  if (!world.gatherToRoot(failed ? st.message() : std::string(), all))
    all.assign(1, st.message());
  if (world.rank() != 0)
    throw SessionEnd{Outcome::everywhere("")};
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
  std::string report;
  for (const auto &[message, ranks] : distinct) {
    std::string who;
    if (int(ranks.size()) < world.size()) {
      for (int r : ranks)
        who += (who.empty() ? "" : ", ") + std::to_string(r);
      who = (ranks.size() == 1 ? "rank " : "ranks ") + who + ": ";
    }
    report += (report.empty() ? "" : "\n") + who + message;
  }
  throw SessionEnd{Outcome::everywhere(report)};
}

} // namespace sluice::rt::session
