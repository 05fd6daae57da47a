//===- ExpertBias.cpp - Auxiliary-loss-free load balancing ----------------===//

#include "ExpertBias.h"

#include <numeric>

namespace sluice::rt {

void updateExpertBias(const double *copies, int64_t experts, double gamma,
                      std::vector<float> &bias) {
  double mean = std::accumulate(copies, copies + experts, 0.0) /
                double(experts);
  for (int64_t e = 0; e < experts; ++e) {
    // b_e += gamma sign(mean - load_e), in fp32 as the bias is kept.
    double offset = mean - copies[e];
    float step = float(gamma);
    if (offset > 0)
      bias[size_t(e)] += step;
    else if (offset < 0)
      bias[size_t(e)] -= step;
  }
}

Status applyExpertBias(const ModelConfig &model,
                       const std::vector<double> &copies,
                       ParameterStore &store) {
  int64_t at = 0;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerConfig &l = model.layers[i];
    if (l.kind != LayerKind::Transformer || l.experts == 0)
      continue;
    int64_t first = at;
    at += l.experts;
    if (!(l.biasUpdate > 0))
      continue;
    std::string name = getLayerPrefix(model, int(i)) + "mlp.router.bias";
    if (!store.contains(name))
      continue;
    if (at > int64_t(copies.size()))
      return Status::error("the step's expert load has " +
                           std::to_string(copies.size()) +
                           " entries, too few for layer " + std::to_string(i));
    std::vector<float> bias;
    if (Status st = store.readMaster(name, bias); !st)
      return st;
    updateExpertBias(copies.data() + first, l.experts, l.biasUpdate, bias);
    if (Status st = store.writeMaster(name, bias); !st)
      return st;
  }
  return Status::ok();
}

} // namespace sluice::rt
