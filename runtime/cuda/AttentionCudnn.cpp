//===- AttentionCudnn.cpp - cuDNN's fused attention for bf16 slices -------===//
//
// The only file that includes cudnn-frontend: its headers take minutes and
// gigabytes to compile, once, here.

#include "AttentionCudnn.h"

#include <cudnn_frontend.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace sluice::rt::cuda {

namespace fe = cudnn_frontend;

namespace {
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

/// (b, h, s, d) dims and strides of the runtime's layouts (Backend.h).
std::vector<int64_t> queryStrides(const AttentionShape &s) {
  int64_t hd = s.heads * s.headDim;
  return {s.tokens * hd, s.headDim, hd, 1};
}
std::vector<int64_t> cacheStrides(const AttentionShape &s, int64_t rowsApart) {
  int64_t kvw = s.kvHeads * s.headDim;
  return {rowsApart * kvw, s.headDim, kvw, 1};
}
} // namespace

struct CudnnAttention::Graph {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  /// Whether the plans still wait to be timed (autotune only).
  bool untimed = false;
};

CudnnAttention::CudnnAttention(ErrorSink &errors) : errors(errors) {}

Status CudnnAttention::create(ErrorSink &errors,
                              std::unique_ptr<CudnnAttention> &out) {
  // SLUICE_CUDNN_ATTENTION=0 runs the hand-written kernel everywhere (the
  // GPU suite tests both).
  if (!getEnvFlag("SLUICE_CUDNN_ATTENTION", true))
    return Status::ok();
  cudnnHandle_t handle = nullptr;
  cudnnStatus_t status = cudnnCreate(&handle);
  if (status != CUDNN_STATUS_SUCCESS)
    // No usable cuDNN: every attention runs the hand-written kernel.
    return Status::ok();
  out.reset(new CudnnAttention(errors));
  out->handle = handle;
  out->deterministic = getEnvFlag("SLUICE_ATTENTION_DETERMINISTIC", true);
  out->autotune = getEnvFlag("SLUICE_CUDNN_AUTOTUNE", false);
  return Status::ok();
}

std::string describeDnnLibrary() {
  Dl_info info{};
  dladdr(reinterpret_cast<void *>(&cudnnGetVersion), &info);
  size_t v = cudnnGetVersion();
  // 9.x: major * 10000 + minor * 100 + patch.
  return "cuDNN " + std::to_string(v / 10000) + "." +
         std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) +
         " from " + (info.dli_fname ? info.dli_fname : "an unknown path");
}

CudnnAttention::~CudnnAttention() {
  graphs.clear();
  for (void *buffer : {workspace, dk, dv})
    if (buffer)
      cudaFree(buffer);
  if (handle)
    cudnnDestroy(static_cast<cudnnHandle_t>(handle));
}

void *CudnnAttention::reserve(void *&buffer, size_t &size, size_t bytes,
                              cudaStream_t stream) {
  return reserveScratch(errors, buffer, size, bytes, stream);
}

/// Validates `graph` and builds its execution plans (all of them when
/// autotuning, which times them at the first run), with the workspace
/// they need; false where cuDNN refuses it.
static bool buildPlans(fe::graph::Graph &graph, cudnnHandle_t h, bool autotune,
                       int64_t &workspace) {
  bool ok =
      graph.validate().is_good() && graph.build_operation_graph(h).is_good() &&
      graph.create_execution_plans({fe::HeurMode_t::A}).is_good() &&
      graph.check_support(h).is_good() &&
      graph
          .build_plans(h, autotune ? fe::BuildPlanPolicy_t::ALL
                                   : fe::BuildPlanPolicy_t::HEURISTICS_CHOICE)
          .is_good();
  if (!ok)
    return false;
  // Timing needs room for the hungriest plan.
  if (autotune) {
    workspace = graph.get_autotune_workspace_size();
    return true;
  }
  return graph.get_workspace_size(workspace).is_good();
}

CudnnAttention::Graph *CudnnAttention::getGraph(bool backward,
                                                const AttentionShape &s) {
  Key key{backward, s.rows,  s.tokens,  s.offset,
          s.seqLen, s.heads, s.headDim, s.kvHeads};
  auto found = graphs.find(key);
  if (found != graphs.end())
    return found->second.get();
  auto built = std::make_unique<Graph>();
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  int64_t span = s.offset + s.tokens;
  auto tensor = [&](const char *name, Uid uid, int64_t heads, int64_t rows,
                    std::vector<int64_t> strides) {
    return graph->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({s.rows, heads, rows, s.headDim})
                             .set_stride(strides));
  };
  auto q = tensor("Q", kQ, s.heads, s.tokens, queryStrides(s));
  auto k = tensor("K", kK, s.kvHeads, span, cacheStrides(s, s.seqLen));
  auto v = tensor("V", kV, s.kvHeads, span, cacheStrides(s, s.seqLen));
  float scale = 1.0f / std::sqrt(float(s.headDim));
  // Causal: query i of the slice (at position offset + i) sees keys up to
  // offset + i, the diagonal through the bottom-right corner. Without
  // context (offset 0, a square) that is the top-left diagonal too, and told
  // so cuDNN 9.19's sm90 backward runs twice as fast (the 1B step on an
  // H100: flash backward 122 -> 60 ms, its deterministic dQ 72 -> 38 ms a
  // step; bench/results/h100-2026-11-24.md): say top-left then.
  auto alignment = s.offset == 0 ? fe::DiagonalAlignment_t::TOP_LEFT
                                 : fe::DiagonalAlignment_t::BOTTOM_RIGHT;
  if (!backward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("attention")
                       .set_generate_stats(true)
                       .set_attn_scale(scale)
                       .set_diagonal_alignment(alignment)
                       .set_diagonal_band_right_bound(0);
    auto [o, stats] = graph->sdpa(q, k, v, options);
    o->set_output(true)
        .set_uid(kO)
        .set_dim({s.rows, s.heads, s.tokens, s.headDim})
        .set_stride(queryStrides(s));
    stats->set_output(true).set_uid(kStats).set_data_type(
        fe::DataType_t::FLOAT);
  } else {
    auto o = tensor("O", kO, s.heads, s.tokens, queryStrides(s));
    auto dO = tensor("dO", kDO, s.heads, s.tokens, queryStrides(s));
    auto stats =
        graph->tensor(fe::graph::Tensor_attributes()
                          .set_name("stats")
                          .set_uid(kStats)
                          .set_dim({s.rows, s.heads, s.tokens, 1})
                          .set_stride({s.heads * s.tokens, s.tokens, 1, 1})
                          .set_data_type(fe::DataType_t::FLOAT));
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("attention backward")
                       .set_attn_scale(scale)
                       .set_diagonal_alignment(alignment)
                       .set_diagonal_band_right_bound(0)
                       .set_deterministic_algorithm(deterministic);
    auto [dQ, dK, dV] = graph->sdpa_backward(q, k, v, o, dO, stats, options);
    dQ->set_output(true)
        .set_uid(kDQ)
        .set_dim({s.rows, s.heads, s.tokens, s.headDim})
        .set_stride(queryStrides(s));
    for (auto [t, uid] : {std::pair{dK, kDK}, std::pair{dV, kDV}})
      t->set_output(true)
          .set_uid(uid)
          .set_dim({s.rows, s.kvHeads, span, s.headDim})
          .set_stride(cacheStrides(s, span));
  }
  built->untimed = autotune;
  if (!buildPlans(*graph, static_cast<cudnnHandle_t>(handle), autotune,
                  built->workspace)) {
    std::fprintf(stderr,
                 "sluice-run: note: cuDNN attention refuses %s of %lld "
                 "queries after %lld tokens (%lld heads of %lld, %lld "
                 "key/value heads); using the fallback kernel\n",
                 backward ? "the backward" : "the forward", (long long)s.tokens,
                 (long long)s.offset, (long long)s.heads, (long long)s.headDim,
                 (long long)s.kvHeads);
    graphs[key] = nullptr;
    return nullptr;
  }
  built->graph = std::move(graph);
  return (graphs[key] = std::move(built)).get();
}

void CudnnAttention::run(Graph &g, cudaStream_t stream,
                         std::unordered_map<int64_t, void *> &pack,
                         void *workspace, const char *what) {
  auto h = static_cast<cudnnHandle_t>(handle);
  cudnnSetStream(h, stream);
  if (g.untimed) {
    // Once per shape: every plan runs on these operands (outputs are
    // overwritten, so timing on them is harmless) and the fastest leads.
    g.untimed = false;
    fe::error_t status = g.graph->autotune(h, pack, workspace);
    if (!status.is_good())
      std::fprintf(stderr, "sluice-run: note: %scould not time plans (%s)\n",
                   what, status.get_message().c_str());
  }
  fe::error_t status = g.graph->execute(h, pack, workspace);
  if (!status.is_good())
    errors.check(cudaErrorUnknown, (what + status.get_message()).c_str(),
                 __FILE__, __LINE__);
}

bool CudnnAttention::forward(cudaStream_t stream, const AttentionShape &s,
                             DevicePtr q, DevicePtr keys, DevicePtr values,
                             DevicePtr lse, DevicePtr context) {
  if (q.getType() != DType::BF16)
    return false;
  Graph *g = getGraph(false, s);
  if (!g)
    return false;
  void *ws = reserve(workspace, workspaceBytes, size_t(g->workspace), stream);
  std::unordered_map<int64_t, void *> pack = {{kQ, q.get()},
                                              {kK, keys.get()},
                                              {kV, values.get()},
                                              {kO, context.get()},
                                              {kStats, lse.get()}};
  run(*g, stream, pack, ws, "cuDNN attention forward: ");
  return true;
}

bool CudnnAttention::backward(cudaStream_t stream, const AttentionShape &s,
                              DevicePtr q, DevicePtr keys, DevicePtr values,
                              DevicePtr context, DevicePtr lse,
                              DevicePtr dcontext, DevicePtr dq,
                              DevicePtr &dkScratch, DevicePtr &dvScratch) {
  if (q.getType() != DType::BF16)
    return false;
  Graph *g = getGraph(true, s);
  if (!g)
    return false;
  size_t cache = size_t(s.rows * (s.offset + s.tokens) * s.kvHeads * s.headDim *
                        getSize(DType::BF16));
  void *ws = reserve(workspace, workspaceBytes, size_t(g->workspace), stream);
  dkScratch = DevicePtr(reserve(dk, dkBytes, cache, stream), DType::BF16);
  dvScratch = DevicePtr(reserve(dv, dvBytes, cache, stream), DType::BF16);
  std::unordered_map<int64_t, void *> pack = {
      {kQ, q.get()},       {kK, keys.get()},       {kV, values.get()},
      {kO, context.get()}, {kStats, lse.get()},    {kDO, dcontext.get()},
      {kDQ, dq.get()},     {kDK, dkScratch.get()}, {kDV, dvScratch.get()}};
  run(*g, stream, pack, ws, "cuDNN attention backward: ");
  return true;
}

} // namespace sluice::rt::cuda
