//===- Progress.cpp - What rank 0 reports while training ------------------===//

#include "Progress.h"

#include "Checkpoint.h"
#include "ExpertLoad.h"

#include "sluice/Blocks/Feature.h"
#include "sluice/Blocks/Parameters.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

namespace sluice::rt {

double getTrainingFlopsPerSequence(const ModelConfig &model) {
  double s = double(model.seqLen), h = double(model.hidden), forward = 0;
  for (const LayerConfig &l : model.layers) {
    if (l.kind == LayerKind::Output) {
      forward += 2.0 * s * h * double(l.vocab);
      continue;
    }
    if (l.kind != LayerKind::Transformer)
      continue; // a lookup: no multiply-adds
    // Every declared linear map (the core's and its features': a router,
    // a shared expert) and what the features compute beyond them (a
    // mixture of experts' top_k experts per token), as the cost model
    // counts them.
    double matmul = 0;
    for (const ParameterSpec &p : getTransformerParameters(model, l, ""))
      if (p.matmul)
        matmul += double(p.size());
    double linear = 2.0 * s * matmul;
    blocks::LayerShape shape = blocks::getLayerShape(model, l, "", {});
    for (const blocks::Feature *f : blocks::getEnabledFeatures(l))
      linear += f->getForwardFlops(shape, model.seqLen, 0);
    // Q.K^T (head_dim) and P.V (the value heads' size) over the keys at
    // or before each position, at most the layer's window of them.
    double widths = double(l.heads * (l.headDim + l.getValueDim()));
    double keys = getKeysAttended(model.seqLen, 0, l.window);
    forward += linear + 2.0 * widths * keys;
  }
  return 3.0 * forward;
}

double getKnownPeakFlops(const std::string &device,
                         const std::string &precision) {
  // Dense tensor-core fp8 and bf16, and plain fp32 (the fp32 runs' GEMMs
  // never use TF32), per SXM datasheet. An fp8 run's peak is fp8's (an
  // A100 has no fp8 tensor cores: its bf16); it was fp32's, and the fp8
  // progress line read an MFU of 384-519%.
  struct Known {
    const char *name;
    double fp8, bf16, fp32;
  };
  static const Known known[] = {{"H200", 1978.9e12, 989.4e12, 66.9e12},
                                {"H100", 1978.9e12, 989.4e12, 66.9e12},
                                {"A100", 312e12, 312e12, 19.5e12}};
  for (const Known &k : known)
    if (device.find(k.name) != std::string::npos)
      return precision == "fp8"    ? k.fp8
             : precision == "bf16" ? k.bf16
                                   : k.fp32;
  return 0;
}

namespace {
/// Rewrites the JSON-lines file at `path` without the records whose step
/// is past `step` (records and lines that are not JSON objects stay); a
/// file that does not exist is left so.
Status dropRecordsAfter(const std::string &path, int64_t step) {
  std::ifstream in(path);
  if (!in)
    return Status::ok();
  std::string line, kept;
  bool dropped = false;
  while (std::getline(in, line)) {
    nlohmann::json record =
        nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_object() && record.contains("step") &&
        record["step"].is_number_integer() &&
        record["step"].get<int64_t>() > step) {
      dropped = true;
      continue;
    }
    kept += line + "\n";
  }
  if (!dropped)
    return Status::ok();
  return writeFileAtomically(path, kept);
}
} // namespace

ProgressLog::~ProgressLog() {
  if (metrics)
    std::fclose(metrics);
}

Status ProgressLog::open(const Setup &s) {
  setup = s;
  if (setup.metricsPath.empty())
    return Status::ok();
  // Appended to: a resumed run continues the file, whose records carry
  // their step numbers. The records past the step it resumes from (an
  // interrupted run's steps after its checkpoint, trained again now) are
  // dropped first, so that each step has one record: the file is
  // rewritten whole, atomically, before the appends.
  if (Status st = dropRecordsAfter(setup.metricsPath, setup.firstStep); !st)
    return st;
  metrics = std::fopen(setup.metricsPath.c_str(), "a");
  if (!metrics)
    return Status::error("cannot open --metrics file '" + setup.metricsPath +
                         "': " + std::strerror(errno));
  return Status::ok();
}

Status ProgressLog::write(const std::string &line) {
  if (!metrics)
    return Status::ok();
  if (std::fputs(line.c_str(), metrics) < 0 || std::fputc('\n', metrics) < 0 ||
      std::fflush(metrics) != 0)
    return Status::error("cannot write --metrics file '" + setup.metricsPath +
                         "': " + std::strerror(errno));
  return Status::ok();
}

namespace {
/// "1:02:03", "2:03".
std::string formatDuration(double seconds) {
  long long total = std::llround(std::max(0.0, seconds));
  char text[32];
  if (total >= 3600)
    std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", total / 3600,
                  total / 60 % 60, total % 60);
  else
    std::snprintf(text, sizeof(text), "%lld:%02lld", total / 60, total % 60);
  return text;
}
} // namespace

Status ProgressLog::record(int64_t step, double loss, double lr,
                           double gradNorm, double clipScale, double seconds,
                           const ExpertLoad *load) {
  ++pendingSteps;
  pendingSeconds += seconds;
  totalSeconds += seconds;
  if (steps++ == 0)
    firstLoss = loss;
  lastLoss = loss;
  bool last = step == setup.lastStep;
  if (!last && step % setup.logEvery != 0)
    return Status::ok();
  double stepSeconds = pendingSeconds / double(pendingSteps);
  double tokensPerSecond = setup.tokensPerStep / stepSeconds;
  double mfu = setup.peakFlops > 0
                   ? setup.flopsPerStep / stepSeconds / setup.peakFlops
                   : -1;
  int64_t done = step - setup.firstStep;
  double eta = totalSeconds / double(done) * double(setup.lastStep - step);
  pendingSteps = 0;
  pendingSeconds = 0;

  // The figures a resumed run must repeat come first, the machine's after.
  std::printf("step %lld: loss %.7f | lr %.4e | grad norm %.4e%s",
              (long long)step, loss, lr, gradNorm,
              clipScale < 1 ? " (clipped)" : "");
  // The step's routing: the busiest expert of the worst layer against the
  // mean (1.00: even).
  if (load)
    std::printf(" | experts max/mean %.2f", load->worst);
  std::printf(" | %.0f tokens/s", tokensPerSecond);
  if (mfu >= 0)
    std::printf(" | MFU %.1f%%", 100.0 * mfu);
  std::printf(" | %.1f ms/step | ETA %s\n", stepSeconds * 1e3,
              formatDuration(eta).c_str());
  std::fflush(stdout);

  nlohmann::json record = {{"step", step},
                           {"loss", loss},
                           {"lr", lr},
                           {"grad_norm", gradNorm},
                           {"clip_scale", clipScale},
                           {"tokens", double(step) * setup.tokensPerStep},
                           {"tokens_per_s", tokensPerSecond},
                           {"step_time_s", stepSeconds},
                           {"eta_s", eta}};
  if (mfu >= 0)
    record["mfu"] = mfu;
  if (load) {
    record["expert_load"] = load->worst;
    record["expert_load_layers"] = load->layers;
  }
  return write(record.dump());
}

Status ProgressLog::evaluation(int64_t step, double loss, int64_t tokens) {
  if (firstValidation < 0)
    firstValidation = loss;
  lastValidation = loss;
  std::printf("step %lld: validation loss %.7f (perplexity %.2f) over %lld "
              "tokens\n",
              (long long)step, loss, std::exp(loss), (long long)tokens);
  std::fflush(stdout);
  return write(nlohmann::json{{"step", step},
                              {"val_loss", loss},
                              {"val_tokens", tokens}}
                   .dump());
}

void ProgressLog::finish() const {
  if (steps == 0)
    return;
  std::printf("trained steps %lld-%lld in %.1f s (%.0f tokens/s): loss "
              "%.4f -> %.4f",
              (long long)(setup.firstStep + 1), (long long)setup.lastStep,
              totalSeconds, setup.tokensPerStep * double(steps) / totalSeconds,
              firstLoss, lastLoss);
  if (firstValidation >= 0)
    std::printf(", validation %.4f -> %.4f", firstValidation, lastValidation);
  std::printf("\n");
  std::fflush(stdout);
}

} // namespace sluice::rt
