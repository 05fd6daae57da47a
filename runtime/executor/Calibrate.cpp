//===- Calibrate.cpp - Time a device's stages over slice shapes -----------===//

#include "Calibrate.h"

#include <algorithm>
#include <tuple>

namespace sluice::rt {

Status calibrateStages(
    const Plan &plan, Device &device,
    const std::vector<std::unique_ptr<StageRunner>> &stages,
    ParameterStore &parameters, int repeats,
    std::map<std::string, std::vector<SliceSample>> &samples) {
  Kernels &kernels = device.getKernels(StreamKind::Compute);
  Stream &compute = device.getStream(StreamKind::Compute);
  const ModelConfig &model = plan.model;
  int64_t rows = model.microBatch, seq = model.seqLen, h = model.hidden;
  DType act = plan.precision.activations;
  // Lengths growing by about 1.5x up to the sequence, each at a few
  // contexts from none to the most it can have.
  std::vector<int64_t> lengths;
  for (int64_t i = 1; i < seq; i = std::max(i + 1, i * 3 / 2))
    lengths.push_back(i);
  lengths.push_back(seq);
  // Synthetic tokens: valid ids, any values.
  std::vector<int32_t> host(rows * (seq + 1));
  int64_t vocab = model.layers.front().vocab;
  for (size_t t = 0; t < host.size(); ++t)
    host[t] = int32_t((t * 7919) % vocab);
  DeviceBuffer synthetic;
  if (Status st = device.allocate(DType::I32, int64_t(host.size()), synthetic);
      !st)
    return st;
  device.upload(synthetic.get(), host.data(),
                int64_t(host.size() * sizeof(int32_t)), compute);
  TokenRows batch{synthetic.get(), seq + 1};
  int64_t activation = rows * h * getSize(act);
  std::unique_ptr<Event> start = device.createEvent(),
                         end = device.createEvent();
  for (size_t index = 0; index < stages.size(); ++index) {
    if (!stages[index])
      continue;
    StageRunner &stage = *stages[index];
    std::vector<SliceSample> &out = samples[plan.stages[index].name];
    for (int64_t length : lengths)
      for (int part = 0; part <= 3; ++part) {
        int64_t context = (seq - length) * part / 3;
        if (part > 0 && context == 0)
          continue;
        SliceShape s{rows, length, context};
        // The whole activation (the stage's shards calibrate alone) and
        // what a message carries after it.
        int64_t message =
            std::max(activation * length,
                     getMessageBytes(model, s, plan.precision));
        // Fresh buffers of the sizes the layout gives this slice.
        DeviceBuffer state, wstate, rstate, kv, work, in, outBuf, grad, inGrad,
            loss;
        for (auto [buffer, type, bytes] :
             {std::tuple{&state, act, stage.getForwardStateBytes(s)},
              std::tuple{&rstate, act, stage.getRecomputedStateBytes(s)},
              std::tuple{&wstate, act, stage.getWeightStateBytes(s)},
              std::tuple{&kv, act, stage.getKeyValueBytes(rows)},
              std::tuple{&work, act, stage.getWorkspaceBytes(s)},
              std::tuple{&in, act, message},
              std::tuple{&outBuf, act, message},
              std::tuple{&grad, act, message},
              std::tuple{&inGrad, act, message},
              std::tuple{&loss, DType::F64, getSize(DType::F64)}})
          if (Status st = device.allocateBytes(type, bytes, *buffer); !st)
            return st;
        kernels.fill(in.get(), 0.01, rows * length * h);
        kernels.fill(grad.get(), 0.01, rows * length * h);
        double best = 1e300;
        for (int r = 0; r < repeats; ++r) {
          start->record(compute);
          stage.forward(s, batch, in.get(), outBuf.get(), state.get(), kv.get(),
                        work.get(), loss.get());
          stage.backwardInput(s, batch, grad.get(), inGrad.get(), state.get(),
                              wstate.get(), kv.get(), work.get(), 1.0f,
                              rstate.get());
          stage.backwardWeight(s, batch, state.get(), wstate.get(), work.get(),
                               rstate.get());
          end->record(compute);
          if (Status st = compute.synchronize(); !st)
            return st;
          best = std::min(best, end->secondsSince(*start));
        }
        out.push_back({length, context, best});
      }
  }
  // The calibration accumulated gradients into the real ones.
  parameters.zeroGrads();
  return compute.synchronize();
}

} // namespace sluice::rt
