//===- Gradients.h - A run's gradients against another's -------*- C++ -*-===//
//
// --dump-grads writes the first step's gradients, a file per tensor (a
// vocabulary shard's real rows under their row range, a tensor-parallel
// slice under its shard's name); --check-against reads them back and
// measures how far this run's are from them.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_GRADIENTS_H
#define SLUICE_RUNTIME_SESSION_GRADIENTS_H

#include "Parameters.h"
#include "Status.h"

#include <string>

namespace sluice::rt::session {

/// Writes every parameter's gradient this rank holds to `dir`.
Status dumpGradients(const std::string &dir, ParameterStore &params);

/// The largest relative difference of this rank's gradients from the
/// dumped ones: max |a - b| / max |b| per tensor, and that tensor's name.
Status compareGradients(const std::string &dir, ParameterStore &params,
                        double &worst, std::string &worstName);

} // namespace sluice::rt::session

#endif // SLUICE_RUNTIME_SESSION_GRADIENTS_H
