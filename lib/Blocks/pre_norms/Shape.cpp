//===- Shape.cpp - pre_norms: a norm before each half ---------------------===//
//
// The pre-norm block (Xiong et al., 2020; GPT-2, Llama and most models
// since): attention reads norm1(x) and the feed-forward block norm2(x2),
// each a LayerNorm or RMSNorm (the layer's `norm`) over the hidden size.
// On by default (`pre_norms`); OLMo-2 turns it off and normalises each
// half's output instead (post_norms).
//
// Under sequence parallelism a norm runs on its shard's tokens only, so
// each shard's gains' gradients are its tokens' part: the tensor-parallel
// group sums them (Reduce::Tokens).
//
//===----------------------------------------------------------------------===//

#include "sluice/Blocks/Feature.h"

namespace sluice::blocks {
namespace {

class PreNorms final : public HiddenNormPair {
public:
  PreNorms()
      : HiddenNormPair(
            {"pre_norms",
             getSlotBits({Slot::AttentionInput, Slot::FeedForwardInput}),
             /*order=*/0, &LayerConfig::preNorms},
            "norm1", "norm2") {}
};

} // namespace

SLUICE_DEFINE_FEATURE(pre_norms, PreNorms)

} // namespace sluice::blocks
