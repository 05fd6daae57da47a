//===- Checkpoint.h - Save and restore training state -----------*- C++ -*-===//
//
// A checkpoint directory holds, per saved step, one file per rank with
// that rank's weights and Adam moments, keyed by parameter name, and a
// manifest `step-N.json` naming the step, the files and the run's
// optimizer settings; `checkpoint.json` is a copy of the newest manifest.
// Rank files are written to a temporary name and renamed; the manifests
// are written last, the same way, once every rank is done -- a checkpoint
// is the manifest's, or the previous one, never half of each. Older steps
// beyond the retention count are deleted only then. Loading looks
// parameters up by name in every listed file, so a checkpoint can be
// resumed under a different partitioning.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CHECKPOINT_H
#define SLUICE_RUNTIME_CHECKPOINT_H

#include "Backend.h"
#include "Parameters.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sluice::rt {

/// What a checkpoint records besides the parameters, so that a resumed
/// run continues as the interrupted one would have: the optimizer's
/// constants, its learning-rate schedule, the clipping norm (0: none),
/// the seed of the synthetic tokens and the data order, and the share of
/// the data held out for validation (which decides the training tokens).
struct TrainingSettings {
  AdamConfig adam;
  LearningRateSchedule schedule;
  double clipNorm = 0;
  uint64_t seed = 1;
  double heldOut = 0;
  /// The tokens each step trained on (0: not recorded, a checkpoint from
  /// before 0.15): a resumed run with another batch says so.
  int64_t tokensPerStep = 0;
};

/// A checkpoint's manifest.
struct CheckpointManifest {
  int64_t step = 0;
  std::vector<std::string> files;
  /// Absent in a checkpoint written before settings were recorded.
  std::optional<TrainingSettings> settings;
};

/// Which of a rank's parameters it writes (null: all of them).
using WrittenParameters = std::function<bool(const ParameterSpec &)>;

/// Every rank calls it; `step` is the number of optimizer steps taken.
/// Keeps the newest `keep` (at least 1) steps' files in `dir`. A rank
/// writes the parameters `writes` picks (under expert parallelism the
/// first member of an expert group writes everything, the others their
/// experts only).
Status saveCheckpoint(const std::string &dir, int64_t step,
                      ParameterStore &params, Communicator &comm,
                      const TrainingSettings &settings, int keep = 1,
                      const WrittenParameters &writes = nullptr);

/// Reads the manifest of `dir`'s checkpoint of step `step`, or of its
/// newest one when `step` is -1.
Status readCheckpointManifest(const std::string &dir, int64_t step,
                              CheckpointManifest &manifest);

/// Restores every parameter of `params` from the checkpoint of step
/// `step` (-1: the newest) and returns its step.
Status loadCheckpoint(const std::string &dir, int64_t step,
                      ParameterStore &params, int64_t &loaded);

/// Reads the whole file `path` (an error naming it when it cannot).
Status readFile(const std::string &path, std::string &contents);

/// Writes `contents` to a temporary file beside `path`, then renames it.
Status writeFileAtomically(const std::string &path,
                           const std::string &contents);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_CHECKPOINT_H
