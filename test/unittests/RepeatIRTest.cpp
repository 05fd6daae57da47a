//===- RepeatIRTest.cpp - sluice.repeat stands for the runs it replaces ---===//
//
// The schedule pass writes a device's periodic stretches once, as
// sluice.repeat blocks (repeats=true, as sluice-compile runs it); every pass
// after it -- gradient syncs, tensor sharding, simulation, buffer planning,
// the plan writer -- must treat a block as its runs. Here each compile runs
// both ways and the plans written out in full must be the same byte for
// byte: the same instructions, slots, buffers and predictions. The grid
// covers every schedule, several depths and microbatch counts, data
// parallelism (a stage's last pass in a block's last run), ZeRO-1, full
// recomputation (its own state), the vocabulary shards' collectives, token
// slices and tensor parallelism.
//
//===----------------------------------------------------------------------===//

#include "Require.h"
#include "sluice/Target/Plan.h"
#include "sluice/Transforms/Pipeline.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::sluice;

namespace {

/// Eight small Llama-shaped layers between an embedding and an output
/// layer, fp32.
constexpr const char *kModel = R"mlir(
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %e = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x0 = sluice.transformer_layer %e {heads = 4, kv_heads = 2, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 2, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 2, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 2, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x16x32xf32>
  %x4 = sluice.transformer_layer %x3 {heads = 4, kv_heads = 2, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x16x32xf32>
  %x5 = sluice.transformer_layer %x4 {heads = 4, kv_heads = 2, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x16x32xf32>
  %x6 = sluice.transformer_layer %x5 {heads = 4, kv_heads = 2, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x16x32xf32>
  %x7 = sluice.transformer_layer %x6 {heads = 4, kv_heads = 2, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x16x32xf32>
  %l = sluice.output_layer %x7 {vocab = 64, norm = rmsnorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %l : tensor<f32>
}
)mlir";

/// One compile's flags, as sluice-opt's --sluice-pipeline spells them.
struct Case {
  std::string flags;
};
/// The case's flags as its name in gtest's output.
void PrintTo(const Case &c, std::ostream *os) { *os << c.flags; }

class RepeatIRTest : public ::testing::TestWithParam<Case> {
protected:
  RepeatIRTest() { context.loadDialect<SluiceDialect>(); }

  /// The plan, every instruction written out, and the number of
  /// sluice.repeat blocks the program held.
  std::pair<std::string, size_t> compile(bool repeats) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModel, &context);
    ::sluice::test::require(module, "the test model parses");
    SluicePipelineOptions o;
    std::string flags = GetParam().flags +
                        " costs=h100 plan-buffers=true repeats=" +
                        (repeats ? "true" : "false");
    ::sluice::test::require(succeeded(o.parseFromString(flags)),
                            "the case's flags parse");
    PassManager pm(&context);
    buildSluicePipeline(pm, o);
    ::sluice::test::require(succeeded(pm.run(*module)), "the case compiles");
    size_t blocks = 0;
    module->walk([&](RepeatOp) { ++blocks; });
    std::string plan;
    llvm::raw_string_ostream os(plan);
    ProgramOp program = *module->getOps<ProgramOp>().begin();
    ::sluice::test::require(
        succeeded(exportPlan(program, os, false, /*repeats=*/false)),
        "the plan exports");
    return {plan, blocks};
  }

  MLIRContext context;
};

TEST_P(RepeatIRTest, BlocksRunOutToTheFlatProgram) {
  auto [flat, none] = compile(false);
  auto [folded, blocks] = compile(true);
  EXPECT_EQ(none, 0u);
  // Every case has a steady state long enough to fold: a test that can
  // fail only if the blocks are there.
  EXPECT_GT(blocks, 0u);
  EXPECT_EQ(folded, flat);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, RepeatIRTest,
    ::testing::Values(
        Case{"pp=2 microbatches=16 schedule=1f1b"},
        Case{"pp=4 microbatches=24 schedule=1f1b"},
        Case{"pp=4 microbatches=24 schedule=gpipe"},
        Case{"pp=4 microbatches=24 schedule=zb-h1"},
        Case{"pp=4 microbatches=24 schedule=zb-h2"},
        Case{"pp=2 microbatches=16 schedule=zb-v"},
        Case{"pp=4 microbatches=24 schedule=zb-v"},
        Case{"pp=4 microbatches=24 schedule=v-half"},
        Case{"pp=4 microbatches=32 schedule=v-min"},
        Case{"pp=2 microbatches=16 schedule=interleaved-1f1b"},
        Case{"pp=4 microbatches=24 schedule=seq1f1b slices=2"},
        Case{"pp=2 microbatches=16 schedule=1f1b dp=2"},
        Case{"pp=4 microbatches=24 schedule=zb-h1 dp=2 zero=1"},
        Case{"pp=4 microbatches=24 schedule=v-half dp=3"},
        Case{"pp=4 microbatches=24 schedule=1f1b recompute=full"},
        Case{"pp=4 microbatches=24 schedule=zb-h1 recompute=selective"},
        Case{"pp=4 microbatches=24 schedule=1f1b vocab=vocab-1"},
        Case{"pp=4 microbatches=24 schedule=zb-v vocab=vocab-2"},
        Case{"pp=2 microbatches=16 schedule=1f1b vocab=interlaced"},
        Case{"pp=2 microbatches=16 schedule=1f1b tp=2 sequence-parallel=true"},
        Case{"pp=2 microbatches=16 schedule=zb-h1 tp=2 dp=2"}));

} // namespace
