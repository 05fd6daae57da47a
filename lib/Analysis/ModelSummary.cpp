//===- ModelSummary.cpp - Per-layer-kind parameter and FLOP summary -------===//

#include "sluice/Analysis/ModelSummary.h"

#include <numeric>
#include "sluice/Analysis/LayerCost.h"

#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::sluice;

ModelSummary mlir::sluice::summarizeModel(ModelOp model) {
  ModelSummary summary;
  summary.name = model.getSymName().str();
  summary.seqLen = model.getSeqLen();
  summary.microBatch = model.getMicroBatch();
  llvm::raw_string_ostream(summary.dtype) << model.getDtype();
  summary.totalParams = getModelParameterCount(model);
  summary.activeParams = getModelActiveParameterCount(model);
  model.walk([&](TransformerLayerOp op) {
    const ::sluice::rt::LayerConfig &l = op.getSpec();
    if (l.experts == 0)
      return;
    summary.expertParams += l.experts * 3 * model.getHidden() * l.ffn;
    summary.expertsDivisor = std::gcd(summary.expertsDivisor, l.experts);
  });

  int64_t transformerCount = 0;
  double transformerParams = 0, transformerFlops = 0;
  for (Operation &op : model.getBody().front()) {
    if (isa<ReturnOp>(op))
      continue;
    LayerGroup layer{op.getName().stripDialect().str(), 1,
                     getParameterCount(&op),
                     getForwardFlopsPerToken(&op, model.getSeqLen())};
    if (isa<TransformerLayerOp>(op)) {
      ++transformerCount;
      transformerParams += static_cast<double>(layer.params);
      transformerFlops += layer.flopsPerToken;
    }
    // Group runs of identical layers so a 64-layer model reads as one row.
    LayerGroup *last =
        summary.layers.empty() ? nullptr : &summary.layers.back();
    if (last && last->kind == layer.kind && last->params == layer.params &&
        last->flopsPerToken == layer.flopsPerToken)
      ++last->count;
    else
      summary.layers.push_back(layer);
  }

  if (transformerCount == 0)
    return summary;
  double meanParams = transformerParams / transformerCount;
  double meanFlops = transformerFlops / transformerCount;
  Operation *input = model.getEmbedding();
  Operation *output = model.getOutputLayer();
  summary.outputToTransformerParams =
      static_cast<double>(getParameterCount(output)) / meanParams;
  summary.outputToTransformerFlops =
      getForwardFlopsPerToken(output, model.getSeqLen()) / meanFlops;
  summary.inputToTransformerParams =
      static_cast<double>(getParameterCount(input)) / meanParams;
  summary.inputToTransformerFlops =
      getForwardFlopsPerToken(input, model.getSeqLen()) / meanFlops;
  return summary;
}

/// 1234567 -> "1.23M": the table is for people; the JSON keeps exact values.
static std::string humanize(double value) {
  const char *suffix[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (value >= 1000.0 && i < 5) {
    value /= 1000.0;
    ++i;
  }
  std::string out;
  llvm::raw_string_ostream(out)
      << llvm::format(i ? "%.2f%s" : "%.0f%s", value, suffix[i]);
  return out;
}

static void printRatio(llvm::raw_ostream &os, std::optional<double> ratio) {
  if (ratio)
    os << llvm::format("%.2fx", *ratio);
  else
    os << "n/a (no transformer layer)";
}

void mlir::sluice::printModelSummary(const ModelSummary &s,
                                     llvm::raw_ostream &os) {
  os << "model @" << s.name << ": seq_len " << s.seqLen << ", micro_batch "
     << s.microBatch << ", dtype " << s.dtype << ", "
     << humanize(static_cast<double>(s.totalParams)) << " parameters";
  if (s.activeParams != s.totalParams)
    os << " (" << humanize(static_cast<double>(s.activeParams))
       << " active per token)";
  os << "\n";
  os << llvm::format("  %-18s %6s %14s %20s\n", "layer", "count",
                     "params/layer", "fwd FLOPs/token");
  for (const LayerGroup &layer : s.layers)
    os << llvm::format("  %-18s %6lld %14s %20s\n", layer.kind.c_str(),
                       static_cast<long long>(layer.count),
                       humanize(static_cast<double>(layer.params)).c_str(),
                       humanize(layer.flopsPerToken).c_str());
  os << "  output layer / transformer layer: params ";
  printRatio(os, s.outputToTransformerParams);
  os << ", FLOPs ";
  printRatio(os, s.outputToTransformerFlops);
  os << "\n  input layer / transformer layer:  params ";
  printRatio(os, s.inputToTransformerParams);
  os << ", FLOPs ";
  printRatio(os, s.inputToTransformerFlops);
  os << "\n";
}

llvm::json::Value mlir::sluice::toJSON(const ModelSummary &s) {
  llvm::json::Array layers;
  for (const LayerGroup &layer : s.layers)
    layers.push_back(
        llvm::json::Object{{"kind", layer.kind},
                           {"count", layer.count},
                           {"params", layer.params},
                           {"flops_per_token", layer.flopsPerToken}});
  auto ratio = [](std::optional<double> r) -> llvm::json::Value {
    return r ? llvm::json::Value(*r) : llvm::json::Value(nullptr);
  };
  return llvm::json::Object{
      {"model", s.name},
      {"seq_len", s.seqLen},
      {"micro_batch", s.microBatch},
      {"dtype", s.dtype},
      {"total_params", s.totalParams},
      {"active_params", s.activeParams},
      {"layers", std::move(layers)},
      {"output_to_transformer_params", ratio(s.outputToTransformerParams)},
      {"output_to_transformer_flops", ratio(s.outputToTransformerFlops)},
      {"input_to_transformer_params", ratio(s.inputToTransformerParams)},
      {"input_to_transformer_flops", ratio(s.inputToTransformerFlops)},
  };
}
