//===- Calibrate.h - Time a device's stages over slice shapes ---*- C++ -*-===//
//
// The samples token slicing's cost model is fitted to (equation 9 of Li et
// al., 2021; `sluice-run --profile-slices`, docs/slicing.md): each stage's
// forward and backward timed on synthetic data over a grid of slice
// lengths and contexts.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXECUTOR_CALIBRATE_H
#define SLUICE_RUNTIME_EXECUTOR_CALIBRATE_H

#include "Plan.h"
#include "Stage.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sluice::rt {

/// One timing of a stage's forward and backward (F, B and W, or F and BW)
/// on a slice of `tokens` tokens after `context`, in seconds.
struct SliceSample {
  int64_t tokens = 0, context = 0;
  double seconds = 0;
};

/// Times every stage in `stages` (null: not this device's) over lengths
/// growing by about 1.5x up to the sequence, each at a few contexts, the
/// best of `repeats` runs each; stage name -> samples. The gradients the
/// runs accumulate are zeroed after. The caller turns off any collective a
/// stage would issue (a rank calibrates alone).
Status calibrateStages(const Plan &plan, Device &device,
                       const std::vector<std::unique_ptr<StageRunner>> &stages,
                       ParameterStore &parameters, int repeats,
                       std::map<std::string, std::vector<SliceSample>> &out);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_CALIBRATE_H
