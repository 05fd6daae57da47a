//===- Gradients.cpp - A run's gradients against another's ----------------===//

#include "Gradients.h"

#include "Checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>

namespace sluice::rt::session {

namespace {

std::string gradPath(const std::string &dir, const std::string &name) {
  return dir + "/" + name + ".bin";
}

} // namespace

Status dumpGradients(const std::string &dir, ParameterStore &params) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::vector<float> grads;
  if (Status st = params.read(ParameterStore::Tensor::Grads, grads); !st)
    return st;
  for (const ParameterSpec &spec : params.specs()) {
    const float *g = grads.data() + params.offset(spec.name);
    // A vocabulary shard writes its real rows under their row range, a
    // tensor-parallel slice its elements under its shard's name.
    std::string name = spec.name, bytes;
    if (spec.isShard())
      name += ".rows-" + std::to_string(spec.firstRow) + "-" +
              std::to_string(spec.firstRow + spec.getValidRows());
    if (spec.isSlice())
      name += "." + spec.sliceName;
    for (const TensorRun &run : getRuns(spec))
      bytes.append(reinterpret_cast<const char *>(g + run.local),
                   run.count * sizeof(float));
    if (Status st = writeFileAtomically(gradPath(dir, name), bytes); !st)
      return st;
  }
  return Status::ok();
}

Status compareGradients(const std::string &dir, ParameterStore &params,
                        double &worst, std::string &worstName) {
  worst = 0;
  std::vector<float> grads;
  if (Status st = params.read(ParameterStore::Tensor::Grads, grads); !st)
    return st;
  for (const ParameterSpec &spec : params.specs()) {
    std::ifstream in(gradPath(dir, spec.name), std::ios::binary);
    if (!in)
      return Status::error("'" + dir + "' has no gradient of " + spec.name);
    // A shard or slice compares its elements with theirs in the whole
    // tensor; a vocabulary shard's padding rows must have no gradient.
    in.seekg(0, std::ios::end);
    int64_t fileFloats = int64_t(in.tellg()) / int64_t(sizeof(float));
    in.seekg(0);
    std::vector<TensorRun> runs = getRuns(spec);
    int64_t whole = getWholeElements(spec), reach = 0;
    for (const TensorRun &run : runs)
      if (run.count > 0)
        reach = std::max(reach, run.global + run.count);
    if ((whole >= 0 && fileFloats != whole) || fileFloats < reach)
      return Status::error("the gradient of " + spec.name + " in '" + dir +
                           "' has another size");
    std::vector<float> expected(fileFloats);
    in.read(reinterpret_cast<char *>(expected.data()),
            std::streamsize(fileFloats * sizeof(float)));
    const float *g = grads.data() + params.offset(spec.name);
    std::vector<char> real(spec.size(), 0);
    double diff = 0, scale = 0;
    for (const TensorRun &run : runs)
      for (int64_t i = 0; i < run.count; ++i) {
        real[run.local + i] = 1;
        float want = expected[run.global + i];
        diff = std::max(diff, double(std::fabs(g[run.local + i] - want)));
        scale = std::max(scale, double(std::fabs(want)));
      }
    for (int64_t i = 0; i < spec.size(); ++i)
      if (!real[i] && g[i] != 0.0f)
        return Status::error(
            "padding row " +
            std::to_string(spec.firstRow + i / spec.getRowSize()) + " of " +
            spec.name + " has a gradient");
    double relative = scale > 0 ? diff / scale : diff;
    if (relative >= worst) {
      worst = relative;
      worstName = spec.name;
    }
  }
  return Status::ok();
}

} // namespace sluice::rt::session
