//===- Outcome.h - How a training session ended -----------------*- C++ -*-===//
//
// A session's failures are of two kinds, and the caller must end the job
// differently for each:
//
// * every rank found it -- the same check of the same flag or file, or a
//   failure the ranks agreed on (a file one rank could not read): every
//   rank returns it, the report on the ranks that should print it (rank 0,
//   or each host's first rank) and empty on the others; every rank then
//   simply ends;
// * this rank alone failed mid-step: its peers may be waiting for it in a
//   transfer, so the caller prints the report and stops the whole job
//   (MPI_Abort).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_OUTCOME_H
#define SLUICE_RUNTIME_SESSION_OUTCOME_H

#include "Status.h"

#include <string>
#include <utility>

namespace sluice::rt {

class [[nodiscard]] Outcome {
public:
  static Outcome ok() { return Outcome(); }
  /// Every rank ends; this one prints `report` (one error per line) unless
  /// it is empty.
  static Outcome everywhere(std::string report) {
    return Outcome(Kind::Everywhere, std::move(report));
  }
  /// Only this rank failed: the job must be stopped.
  static Outcome thisRank(std::string report) {
    return Outcome(Kind::ThisRank, std::move(report));
  }

  explicit operator bool() const { return kind == Kind::Ok; }
  bool isThisRankOnly() const { return kind == Kind::ThisRank; }
  const std::string &getReport() const { return report; }

private:
  enum class Kind { Ok, Everywhere, ThisRank };
  Outcome() = default;
  Outcome(Kind kind, std::string report)
      : kind(kind), report(std::move(report)) {}
  Kind kind = Kind::Ok;
  std::string report;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_SESSION_OUTCOME_H
