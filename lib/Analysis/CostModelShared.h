//===- CostModelShared.h - What the cost model's files share ------*- C++ -*-===//
//
// Private to lib/Analysis: helpers the stage profiles (StageProfile.cpp),
// the cost model (CostModel.cpp) and a pipeline's costs (PipelineCosts.cpp)
// all use.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_LIB_ANALYSIS_COSTMODELSHARED_H
#define SLUICE_LIB_ANALYSIS_COSTMODELSHARED_H

#include "sluice/SluiceOps.h"

namespace mlir::sluice {

/// Whether tensor-parallel shards split the vocabulary layers' tables by
/// rows (the runtime's splitsVocabulary, both ends alike): not when
/// Vocabulary Parallelism's shards hold them.
inline bool splitsVocabulary(ModelOp model) {
  return model.getBody().getOps<VocabInputOp>().empty();
}

} // namespace mlir::sluice

#endif // SLUICE_LIB_ANALYSIS_COSTMODELSHARED_H
