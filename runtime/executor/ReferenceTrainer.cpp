//===- ReferenceTrainer.cpp - The single-device oracle --------------------===//

#include "ReferenceTrainer.h"
#include "ExpertLoad.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

namespace sluice::rt {

/// The model with its vocabulary layers whole: the reference never shards.
static ModelConfig unsharded(ModelConfig model) {
  for (LayerConfig &layer : model.layers)
    layer.sharded = false;
  return model;
}

ReferenceTrainer::ReferenceTrainer(const ModelConfig &sharded, int microbatches,
                                   const Precision &precision, Device &device,
                                   TokenSource &data,
                                   const TrainerOptions &options)
    : model(unsharded(sharded)), microbatches(microbatches),
      precision(precision), device(device), data(data), options(options) {}

Status ReferenceTrainer::prepare() {
  std::vector<int> all;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    all.push_back(int(i));
    for (const ParameterSpec &spec : getLayerParameters(model, int(i)))
      parameters.add(spec);
  }
  if (Status st = parameters.allocate(device, precision, options.seed); !st)
    return st;
  stage = std::make_unique<StageRunner>(model, all, parameters,
                                        device.getKernels(StreamKind::Compute),
                                        precision);
  int64_t rows = model.microBatch, seq = model.seqLen;
  SliceShape whole{rows, seq, 0};
  DType act = precision.activations;
  for (auto [buffer, type, bytes] :
       {std::tuple{&forward, act, stage->getForwardStateBytes(whole)},
        std::tuple{&weight, act, stage->getWeightStateBytes(whole)},
        std::tuple{&kv, act, stage->getKeyValueBytes(rows)},
        std::tuple{&work, act, stage->getWorkspaceBytes(whole)},
        std::tuple{&tokens, DType::I32, rows * (seq + 1) * getSize(DType::I32)},
        std::tuple{&lossSum, DType::F64, getSize(DType::F64)},
        std::tuple{&normSum, DType::F64, getSize(DType::F64)}})
    if (Status st = device.allocateBytes(type, bytes, *buffer); !st)
      return st;
  if (int64_t count = stage->getFp8StateFloats()) {
    if (Status st = device.allocate(DType::F32, count, fp8); !st)
      return st;
    stage->bindFp8State(fp8.get());
  }
  if (int64_t count = stage->getLoadFloats()) {
    if (Status st = device.allocate(DType::F32, count, load); !st)
      return st;
    stage->bindLoad(load.get());
  }
  return device.synchronize();
}

Status ReferenceTrainer::runStep(int64_t step, double &meanLoss) {
  return run(step, /*gradients=*/true, meanLoss);
}

Status ReferenceTrainer::evaluateStep(int64_t step, double &meanLoss) {
  return run(step, /*gradients=*/false, meanLoss);
}

Status ReferenceTrainer::run(int64_t step, bool gradients, double &meanLoss) {
  int64_t rows = model.microBatch, seq = model.seqLen;
  SliceShape whole{rows, seq, 0};
  Kernels &kernels = device.getKernels(StreamKind::Compute);
  Stream &compute = device.getStream(StreamKind::Compute);
  float lossScale = 1.0f / float(microbatches * rows * seq);
  kernels.fill(lossSum.get(), 0.0, 1);
  stage->clearLoad();
  for (int mb = 0; mb < microbatches; ++mb) {
    data.getBatch(step, mb, rows, seq, hostTokens);
    device.upload(tokens.get(), hostTokens.data(),
                  int64_t(hostTokens.size() * sizeof(int32_t)), compute);
    TokenRows batch{tokens.get(), seq + 1};
    stage->forward(whole, batch, nullptr, nullptr, forward.get(), kv.get(),
                   work.get(), lossSum.get());
    if (gradients) {
      stage->backwardInput(whole, batch, nullptr, nullptr, forward.get(),
                           weight.get(), kv.get(), work.get(), lossScale);
      stage->backwardWeight(whole, batch, forward.get(), weight.get(),
                            work.get());
    }
    // The host tokens are refilled for the next microbatch.
    if (Status st = compute.synchronize(); !st)
      return st;
  }
  stage->finishStep(/*trained=*/gradients);
  double hostLoss = 0;
  device.download(&hostLoss, lossSum.get(), sizeof(double), compute);
  if (Status st = compute.synchronize(); !st)
    return st;
  meanLoss = hostLoss * lossScale;
  return Status::ok();
}

Status ReferenceTrainer::expertLoad(std::vector<double> &copies) {
  copies.clear();
  if (getExpertLoadSize(model) == 0)
    return Status::ok();
  return addExpertLoad(model, {stage.get()}, device,
                       device.getStream(StreamKind::Compute), copies);
}

Status ReferenceTrainer::getNextLogits(const std::vector<int32_t> &ids,
                                       std::vector<float> &logits) {
  int64_t length = int64_t(ids.size()), seq = model.seqLen;
  int64_t vocab = model.layers.back().vocab;
  if (length < 1 || length > seq)
    return Status::error("a sequence of " + std::to_string(length) +
                         " tokens does not fit the model's " +
                         std::to_string(seq));
  Stream &compute = device.getStream(StreamKind::Compute);
  // One row of `length` tokens; its labels (the next tokens) are unused.
  hostTokens.assign(seq + 1, 0);
  std::copy(ids.begin(), ids.end(), hostTokens.begin());
  device.upload(tokens.get(), hostTokens.data(),
                int64_t(hostTokens.size() * sizeof(int32_t)), compute);
  SliceShape slice{1, length, 0};
  stage->forward(slice, TokenRows{tokens.get(), seq + 1}, nullptr, nullptr,
                 forward.get(), kv.get(), work.get(), lossSum.get());
  // The logits are in the activation type (bf16: the upper half of an
  // fp32).
  DevicePtr last = stage->getLogits() + (length - 1) * vocab;
  logits.resize(vocab);
  if (last.getType() == DType::BF16) {
    std::vector<uint16_t> half(vocab);
    device.download(half.data(), last, vocab * int64_t(sizeof(uint16_t)),
                    compute);
    if (Status st = compute.synchronize(); !st)
      return st;
    for (int64_t i = 0; i < vocab; ++i)
      logits[i] = bf16ToFloat(half[i]);
    return Status::ok();
  }
  device.download(logits.data(), last, vocab * int64_t(sizeof(float)),
                  compute);
  return compute.synchronize();
}

Status ReferenceTrainer::gradientNorm(double &norm) {
  Kernels &kernels = device.getKernels(StreamKind::Compute);
  Stream &compute = device.getStream(StreamKind::Compute);
  kernels.fill(normSum.get(), 0.0, 1);
  kernels.sumSquares(parameters.getGrads(), 1, parameters.getTotalElements(),
                     parameters.getTotalElements(), 1.0, normSum.get());
  double sum = 0;
  device.download(&sum, normSum.get(), sizeof(double), compute);
  if (Status st = compute.synchronize(); !st)
    return st;
  norm = std::sqrt(sum);
  return Status::ok();
}

Status ReferenceTrainer::applyOptimizer(int64_t step, float gradientScale) {
  AdamConfig adam = options.getAdam(step);
  adam.gradientScale = gradientScale;
  parameters.adamStep(adam, step);
  parameters.zeroGrads();
  return Status::ok();
}

} // namespace sluice::rt
