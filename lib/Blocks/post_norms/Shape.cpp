//===- Shape.cpp - post_norms: a norm on each half's output ---------------===//
//
// A norm of the layer's kind on the attention's and the feed-forward
// block's outputs before each residual add: x + norm(attn(...)). With the
// pre-norms, Gemma-2's and Gemma-3's sandwich norms (Gemma Team, 2024);
// without them (`pre_norms = false`), OLMo-2's only norms (OLMo Team,
// 2024, "2 OLMo 2 Olmo": reordered norm).
//
// The norms run on each shard's tokens under sequence parallelism, so the
// group sums their gains' gradients (Reduce::Tokens).
//
//===----------------------------------------------------------------------===//

#include "sluice/Blocks/Feature.h"

namespace sluice::blocks {
namespace {

class PostNorms final : public HiddenNormPair {
public:
  // After a bias (the output projection's bias is inside the norm).
  PostNorms()
      : HiddenNormPair(
            {"post_norms",
             getSlotBits({Slot::AttentionOutput, Slot::FeedForwardOutput}),
             /*order=*/20, &LayerConfig::postNorms},
            "post_attn_norm", "post_mlp_norm") {}
};

} // namespace

SLUICE_DEFINE_FEATURE(post_norms, PostNorms)

} // namespace sluice::blocks
