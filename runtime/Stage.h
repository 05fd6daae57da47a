//===- Stage.h - The passes of one pipeline stage ---------------*- C++ -*-===//
//
// Runs F, B and W of one stage (a run of consecutive layers) for one
// microbatch slice. State that one pass leaves for a later one lives in
// caller-provided memory laid out as Layout.h says: `forwardState` (F to B
// and W), `weightState` (B to W) and `keyValues` (a microbatch's keys and
// values, from its first slice's F to its first slice's B). Scratch memory
// is `workspace`, valid only during a call.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_STAGE_H
#define SLUICE_RUNTIME_STAGE_H

#include "Backend.h"
#include "Layout.h"
#include "Parameters.h"

#include <string>
#include <vector>

namespace sluice::rt {

/// A microbatch's tokens: row r's inputs are tokens[r * stride + t] and
/// its labels the next tokens, tokens[r * stride + t + 1].
struct TokenRows {
  const int32_t *tokens = nullptr;
  int64_t stride = 0;
};

class StageRunner {
public:
  /// `layers` are indices into model.layers; `store` must hold their
  /// parameters (allocated).
  StageRunner(const ModelConfig &model, std::vector<int> layers,
              ParameterStore &store, Kernels &kernels);

  bool hasEmbedding() const;
  bool hasOutput() const;
  const std::vector<int> &getLayers() const { return layers; }

  int64_t getForwardStateFloats(const SliceShape &s) const;
  int64_t getWeightStateFloats(const SliceShape &s) const;
  int64_t getKeyValueFloats(int64_t rows) const;
  int64_t getWorkspaceFloats(const SliceShape &s) const;

  /// F. `input` is the previous stage's activation (null on the first
  /// stage); `output` receives this stage's (null on the last stage, which
  /// adds the slice's summed cross-entropy to *loss instead).
  void forward(const SliceShape &s, const TokenRows &batch, const float *input,
               float *output, float *forwardState, float *keyValues,
               float *workspace, double *loss);

  /// B. `outputGrad` is the next stage's input gradient (null on the last
  /// stage, where the loss gradient is `lossScale` per token); `inputGrad`
  /// receives this stage's (null on the first stage).
  void backwardInput(const SliceShape &s, const TokenRows &batch,
                     const float *outputGrad, float *inputGrad,
                     const float *forwardState, float *weightState,
                     float *keyValues, float *workspace, float lossScale);

  /// W: accumulates the stage's weight gradients.
  void backwardWeight(const SliceShape &s, const TokenRows &batch,
                      const float *forwardState, const float *weightState,
                      float *workspace);

private:
  struct LayerParams {
    float *normW = nullptr, *normB = nullptr, *qkvW = nullptr, *qkvB = nullptr,
          *outW = nullptr, *outB = nullptr, *norm2W = nullptr,
          *norm2B = nullptr, *upW = nullptr, *upB = nullptr, *gateW = nullptr,
          *gateB = nullptr, *downW = nullptr, *downB = nullptr,
          *table = nullptr, *positions = nullptr;
  };
  struct Layer {
    const LayerConfig *config;
    LayerParams w, g; // weights and their gradients
  };

  void transformerForward(const Layer &l, const SliceShape &s, const float *x,
                          float *out, float *state, float *kv, float *work);
  void transformerBackward(const Layer &l, const SliceShape &s,
                           const float *dout, float *dx, const float *state,
                           float *wstate, float *kv, float *work);
  void transformerWeight(const Layer &l, const SliceShape &s,
                         const float *state, const float *wstate, float *work);

  const ModelConfig &model;
  std::vector<int> layers;
  std::vector<Layer> resolved;
  Kernels &kernels;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_STAGE_H
