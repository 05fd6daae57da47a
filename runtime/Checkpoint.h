//===- Checkpoint.h - Save and restore training state -----------*- C++ -*-===//
//
// A checkpoint directory holds one file per rank with that rank's weights
// and Adam moments, keyed by parameter name, and `checkpoint.json` naming
// the step and the files. Rank files are written to a temporary name and
// renamed; the manifest is written last, the same way, once every rank is
// done -- a checkpoint is the manifest's, or the previous one, never half
// of each. Loading looks parameters up by name in every listed file, so a
// checkpoint can be resumed under a different partitioning.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CHECKPOINT_H
#define SLUICE_RUNTIME_CHECKPOINT_H

#include "Backend.h"
#include "Parameters.h"

#include <string>

namespace sluice::rt {

/// Every rank calls it; `step` is the number of optimizer steps taken.
Status saveCheckpoint(const std::string &dir, int64_t step,
                      ParameterStore &params, Communicator &comm);

/// Restores every parameter of `params` and returns the checkpoint's step.
Status loadCheckpoint(const std::string &dir, ParameterStore &params,
                      int64_t &step);

/// Reads the whole file `path` (an error naming it when it cannot).
Status readFile(const std::string &path, std::string &contents);

/// Writes `contents` to a temporary file beside `path`, then renames it.
Status writeFileAtomically(const std::string &path,
                           const std::string &contents);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_CHECKPOINT_H
