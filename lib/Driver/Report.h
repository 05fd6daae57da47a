//===- Report.h - What sluice-compile prints ---------------------*- C++
//-*-===//
//
// Private to lib/Driver: the lines a compile and a search print on stdout.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_LIB_DRIVER_REPORT_H
#define SLUICE_LIB_DRIVER_REPORT_H

#include "sluice/Analysis/CostModel.h"
#include "sluice/Search/PlanSearch.h"
#include "sluice/SluiceOps.h"

#include <optional>
#include <string>

namespace mlir::sluice::driver {

/// The slice lengths the compile chose, with the latency fit's error.
void printSlices(ModelOp model);

/// The prediction: step time, bubble ratio, the most loaded device's peak
/// activation and peak memory (`peakMemoryBytes`, a device's bytes), and
/// the MFU where the cost model has a peak.
void printPrediction(ProgramOp program, llvm::StringRef costs,
                     llvm::ArrayRef<double> peakMemoryBytes);

/// For `GPU:calibrate=PROFILE.json`, the efficiency the profile gives the
/// model: "calibrated: ..."; nullopt for other costs, and with `error` set
/// where the profile cannot calibrate this model.
std::optional<std::string>
getCalibrationNote(const CostModel &model, ModelOp shaped, std::string &error);

/// The --search table: the fastest `top` plans that fit, then why the
/// best beats the runner-up.
void printSearchTable(const SearchResult &found, const SearchSpace &space,
                      int64_t seqLength, int64_t top, double seconds,
                      const std::optional<std::string> &calibration);

/// The plan with the least memory of `estimates`.
const PlanEstimate &getLeanest(llvm::ArrayRef<PlanEstimate> estimates);

} // namespace mlir::sluice::driver

#endif // SLUICE_LIB_DRIVER_REPORT_H
