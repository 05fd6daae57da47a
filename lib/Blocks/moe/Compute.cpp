//===- Compute.cpp - moe: a mixture of experts in the feed-forward's place ===//
//
// F, B and W of the mixture-of-experts block (Shape.cpp) on the routing
// kernels of runtime/Kernels.def: the router's logits in fp32 (as
// transformers' softmax runs with dtype=float), its softmax and top-k
// (moeRoute), the tokens' k copies sorted by expert (moeSort) and gathered
// (moeGather), each expert's gate, up and down maps as one grouped GEMM
// over its contiguous copies, and the weighted sum back per token
// (moeCombine). B runs the same chain backwards; the router's logits
// gradient is stored in the activation type, as the product that reads it
// takes, and W reads it for the router's weight gradient. With a
// load-balancing loss (aux_loss), F adds its routing's statistics to the
// stage's (moeBalance) and B the loss's gradient at the probabilities
// (moeRouteBackward's `balance`): Stage.cpp carries them between layers
// and stages.
//
// The copies' count is tokens x top_k whatever the routing (dropless), so
// every region has a size the plan knows; only the split among experts
// (the offsets) is data.
//
// Under expert parallelism (docs/moe.md) the member holds El = experts /
// members of them: F routes and sorts its own tokens as above, tells each
// member how many copies it sends each of that member's experts (an
// all-to-all of El counts a member), sends the copies (an all-to-all of
// rows), regroups what it received expert by expert (ExpertDispatch.h),
// runs its experts' grouped GEMMs on those rows, and returns the outputs
// by the reverse all-to-all before combining them as above. B sends the
// copies' output gradients the same way and returns their input
// gradients; W reads the rows F received and B's gradients there, with no
// communication. The rows a member receives are data; the plan sizes the
// state for the most any routing sends it, or for the plan's capacity, a
// routing beyond which every member refuses alike
// (sluice/Blocks/ExpertCapacity.h).
//
//===----------------------------------------------------------------------===//

#include "sluice/Blocks/ExpertCapacity.h"
#include "ExpertDispatch.h"
#include "Slots.h"

#include <cstdio>

namespace sluice::rt::block {
namespace {

class MoeCompute final : public FeatureCompute {
public:
  void forward(Slot, const SlotContext &c,
               const SlotTensors &t) const override {
    Kernels &k = c.kernels;
    Sizes z = getSizes(c);
    Routing r = getRouting(c, z);
    DevicePtr logits = f32At(c, 0),
              permuted = actAt(c, 2 * z.rt * z.experts + 2 * z.rt);
    k.gemm(false, false, z.rt, z.experts, z.h, 1.0f, t.x, z.h,
           c.weight("mlp.router.weight"), z.experts, 0.0f, logits, z.experts);
    k.moeRoute(logits, z.rt, z.experts, z.k, getRule(c), r.probs, r.chosen,
               r.weights);
    k.moeSort(r.chosen, z.rt, z.k, z.experts, r.order, r.position, r.offsets);
    for (DevicePtr stats : {c.balance.stats, c.balance.load})
      if (stats)
        k.moeBalance(r.probs, r.offsets, z.rt, z.experts, stats);
    Hidden x = getHidden(c, z);
    DevicePtr rows = c.region(2);
    if (z.members > 1) {
      // The copies leave for their experts' members and come back.
      Exchange e = getExchange(c, z);
      k.moeGather(t.x, r.order, z.rt, z.k, z.h, e.tokens);
      Dispatch d = dispatch(c, z, r, /*exchange=*/true);
      if (d.refused) {
        // Every member skips the rows' all-to-alls alike; the executor
        // ends the step with the refusal after this pass.
        k.fill(t.out, 0.0, z.rt * z.h);
        return;
      }
      c.seams.getExperts().allToAll(e.tokens, d.send, e.source, d.recv);
      regroup(c, z, d, e.source, x.in, /*toExperts=*/true);
      runExperts(c, z, d.offsets, d.received, x.in, x, e.experts);
      regroup(c, z, d, e.source, e.experts, /*toExperts=*/false);
      c.seams.getExperts().allToAll(e.source, d.recv, rows, d.send);
    } else {
      k.moeGather(t.x, r.order, z.rt, z.k, z.h, permuted);
      runExperts(c, z, r.offsets, z.copies, permuted, x, rows);
    }
    k.fill(t.out, 0.0, z.rt * z.h);
    k.moeCombine(rows, r.position, r.weights, z.rt, z.k, z.h, t.out);
    if (!z.fs)
      return;
    // The shared expert, every token, scaled by its sigmoid gate.
    Shared e = getShared(c, z, r);
    k.gemm(false, false, z.rt, z.fs, z.h, 1.0f, t.x, z.h,
           c.weight("mlp.shared.up.weight"), z.fs, 0.0f, e.up, z.fs);
    k.gemm(false, false, z.rt, z.fs, z.h, 1.0f, t.x, z.h,
           c.weight("mlp.shared.gate.weight"), z.fs, 0.0f, e.gate, z.fs);
    k.gatedForward(activation(c.model, c.layer), e.gate, e.up, e.act,
                   z.rt * z.fs);
    k.gemm(false, false, z.rt, z.h, z.fs, 1.0f, e.act, z.fs,
           c.weight("mlp.shared.down.weight"), z.h, 0.0f, e.out, z.h);
    if (!z.gated) {
      // DeepSeek's shared expert: added as it is.
      k.add(t.out, e.out, z.rt * z.h);
      return;
    }
    DevicePtr logit = f32At(c, 2 * z.rt * z.experts);
    k.gemm(false, false, z.rt, 1, z.h, 1.0f, t.x, z.h,
           c.weight("mlp.shared_gate.weight"), 1, 0.0f, logit, 1);
    k.gateRowsForward(logit, e.out, z.rt, z.h, e.g, t.out);
  }

  /// `grad` the block's output gradient, `out` receives its input's.
  bool backward(Slot, const SlotContext &c,
                const SlotTensors &t) const override {
    Kernels &k = c.kernels;
    Sizes z = getSizes(c);
    Routing r = getRouting(c, z);
    DevicePtr dweights = f32At(c, 0), dlogits32 = f32At(c, 2 * z.copies);
    DevicePtr dpermuted =
        actAt(c, 2 * z.copies + 2 * z.rt * z.experts + 2 * z.rt);
    DevicePtr dact = dpermuted + z.copies * z.h;
    Hidden x = getHidden(c, z);
    DevicePtr dup = c.region(3), dgate = dup + z.rows * z.f,
              drows = c.region(4), dlogits = c.region(5);
    if (z.members > 1) {
      // The copies' output gradients go to their experts' members, which
      // return their input gradients.
      Exchange e = getExchange(c, z);
      dpermuted = e.tokens;
      dact = e.dact;
      k.moeCombineBackward(c.region(2), r.position, r.weights, t.grad, z.rt,
                           z.k, z.h, e.tokenGrads, dweights);
      Dispatch d = dispatch(c, z, r, /*exchange=*/false);
      if (d.refused) {
        k.fill(t.out, 0.0, z.rt * z.h);
        return true;
      }
      c.seams.getExperts().allToAll(e.tokenGrads, d.send, e.source, d.recv);
      regroup(c, z, d, e.source, drows, /*toExperts=*/true);
      expertsBackward(c, z, d.offsets, d.received, drows, x, dact, dgate, dup,
                      e.experts);
      regroup(c, z, d, e.source, e.experts, /*toExperts=*/false);
      c.seams.getExperts().allToAll(e.source, d.recv, dpermuted, d.send);
    } else {
      k.moeCombineBackward(c.region(2), r.position, r.weights, t.grad, z.rt,
                           z.k, z.h, drows, dweights);
      expertsBackward(c, z, r.offsets, z.copies, drows, x, dact, dgate, dup,
                      dpermuted);
    }
    k.moeRouteBackward(r.probs, r.chosen, r.weights, dweights, z.rt, z.experts,
                       z.k, getRule(c), c.balance.counts, c.balance.scale,
                       dlogits32);
    k.copy(dlogits, dlogits32, z.rt * z.experts);
    // The input's gradient: the router's part, then each copy's added back
    // to its token (moeCombine unweighted is moeGather's transpose).
    k.gemm(false, true, z.rt, z.h, z.experts, 1.0f, dlogits, z.experts,
           c.weight("mlp.router.weight"), z.experts, 0.0f, t.out, z.h);
    k.moeCombine(dpermuted, r.position, DevicePtr(), z.rt, z.k, z.h, t.out);
    if (!z.fs)
      return true;
    Shared e = getShared(c, z, r);
    DevicePtr dz = f32At(c, 2 * z.copies + 2 * z.rt * z.experts);
    DevicePtr dactShared = dact + z.rows * z.f;
    if (z.gated)
      k.gateRowsBackward(e.g, e.out, t.grad, z.rt, z.h, e.dout, dz);
    else
      k.copy(e.dout, t.grad, z.rt * z.h);
    k.gemm(false, true, z.rt, z.fs, z.h, 1.0f, e.dout, z.h,
           c.weight("mlp.shared.down.weight"), z.h, 0.0f, dactShared, z.fs);
    k.gatedBackward(activation(c.model, c.layer), e.gate, e.up, dactShared,
                    e.dgate, e.dup, z.rt * z.fs);
    k.gemm(false, true, z.rt, z.h, z.fs, 1.0f, e.dup, z.fs,
           c.weight("mlp.shared.up.weight"), z.fs, 1.0f, t.out, z.h);
    k.gemm(false, true, z.rt, z.h, z.fs, 1.0f, e.dgate, z.fs,
           c.weight("mlp.shared.gate.weight"), z.fs, 1.0f, t.out, z.h);
    if (!z.gated)
      return true;
    k.copy(e.dlogit, dz, z.rt);
    k.gemm(false, true, z.rt, z.h, 1, 1.0f, e.dlogit, 1,
           c.weight("mlp.shared_gate.weight"), 1, 1.0f, t.out, z.h);
    return true;
  }

  /// `x` the block's input again, `grad` its output gradient.
  void weight(Slot, const SlotContext &c,
              const SlotTensors &t) const override {
    Kernels &k = c.kernels;
    Sizes z = getSizes(c);
    Routing r = getRouting(c, z);
    Hidden x = getHidden(c, z);
    DevicePtr dup = c.region(3), dgate = dup + z.rows * z.f;
    // The rows the experts computed on: those F received (kept), or the
    // copies gathered again.
    DevicePtr in = x.in, offsets = getDispatchInts(c, z, r).offsets;
    int64_t groups = z.experts / z.members;
    if (z.members == 1) {
      in = actAt(c, 2 * z.rt * z.experts + 2 * z.rt);
      offsets = r.offsets;
      k.moeGather(t.x, r.order, z.rt, z.k, z.h, in);
    }
    k.groupedGemmWeights(groups, offsets, z.rows, z.h, z.f, in, z.h, dgate,
                         z.f, 1.0f, c.grad("mlp.experts.gate.weight"),
                         z.h * z.f);
    k.groupedGemmWeights(groups, offsets, z.rows, z.h, z.f, in, z.h, dup, z.f,
                         1.0f, c.grad("mlp.experts.up.weight"), z.h * z.f);
    k.groupedGemmWeights(groups, offsets, z.rows, z.f, z.h, x.act, z.f,
                         c.region(4), z.h, 1.0f,
                         c.grad("mlp.experts.down.weight"), z.f * z.h);
    k.gemm(true, false, z.h, z.experts, z.rt, 1.0f, t.x, z.h, c.region(5),
           z.experts, 1.0f, c.grad("mlp.router.weight"), z.experts);
    if (!z.fs)
      return;
    Shared e = getShared(c, z, r);
    k.gemm(true, false, z.h, z.fs, z.rt, 1.0f, t.x, z.h, e.dup, z.fs, 1.0f,
           c.grad("mlp.shared.up.weight"), z.fs);
    k.gemm(true, false, z.h, z.fs, z.rt, 1.0f, t.x, z.h, e.dgate, z.fs, 1.0f,
           c.grad("mlp.shared.gate.weight"), z.fs);
    k.gemm(true, false, z.fs, z.h, z.rt, 1.0f, e.act, z.fs, e.dout, z.h, 1.0f,
           c.grad("mlp.shared.down.weight"), z.h);
    if (z.gated)
      k.gemm(true, false, z.h, 1, z.rt, 1.0f, t.x, z.h, e.dlogit, 1, 1.0f,
             c.grad("mlp.shared_gate.weight"), 1);
  }

private:
  /// `rows`: the rows the member's experts compute on (ExpertCapacity.h; the
  /// copies without expert parallelism), `members` the expert group's.
  struct Sizes {
    int64_t rt, h, f, experts, k, copies, fs, rows;
    int members;
    /// The shared expert has a sigmoid gate (Qwen2-MoE's).
    bool gated;
  };
  static Sizes getSizes(const SlotContext &c) {
    int64_t rt = c.size.rt, k = c.layer.topK;
    int members = std::max(1, c.seams.getExperts().members);
    return {rt,
            c.size.h,
            c.size.f,
            c.layer.experts,
            k,
            rt * k,
            c.layer.sharedFfn,
            blocks::moe::getExpertRows(rt, c.layer, members,
                                       c.model.expertCapacity),
            members,
            blocks::moe::hasSharedGate(c.layer)};
  }

  /// The layer's routing rule; the bias read from the fp32 masters (a
  /// step of the balancing rule is below bf16's resolution).
  static RouterRule getRule(const SlotContext &c) {
    const LayerConfig &l = c.layer;
    RouterRule rule;
    rule.sigmoid = l.router == "sigmoid";
    rule.normalize = l.normTopK;
    rule.scale = float(l.routedScale);
    rule.groups = l.expertGroups;
    rule.topGroups = l.topGroups;
    rule.bias = rule.sigmoid ? c.master("mlp.router.bias") : DevicePtr();
    return rule;
  }

  /// The routing F keeps (Shape.cpp: region 0, fp32 then i32 parts).
  struct Routing {
    DevicePtr probs, chosen, order, position, offsets, weights;
  };
  static Routing getRouting(const SlotContext &c, const Sizes &z) {
    DevicePtr probs = c.region(0), weights = probs + z.rt * z.experts;
    DevicePtr ints = (weights + z.copies).atByte(0, DType::I32);
    return {probs,
            ints,
            ints + z.copies,
            ints + 2 * z.copies,
            ints + 3 * z.copies,
            weights};
  }
  /// The shared expert's tensors: its gate's values (after the routing in
  /// region 0; with a gate), its pre-activations, activation and output (region 6),
  /// and their gradients and the gate logit's (region 7).
  struct Shared {
    DevicePtr g, up, gate, act, out, dup, dgate, dout, dlogit;
  };
  static Shared getShared(const SlotContext &c, const Sizes &z,
                          const Routing &r) {
    int64_t n = z.rt * z.fs;
    DevicePtr up = c.region(6), dup = c.region(7);
    return {(r.offsets + (z.experts + 1)).atByte(0, DType::F32),
            up,
            up + n,
            up + 2 * n,
            up + 3 * n,
            dup,
            dup + n,
            dup + 2 * n,
            dup + 2 * n + z.rt * z.h};
  }
  /// The experts' up and gate pre-activations and activation (region 1),
  /// and under expert parallelism the rows the member received (after
  /// them).
  struct Hidden {
    DevicePtr up, gate, act, in;
  };
  static Hidden getHidden(const SlotContext &c, const Sizes &z) {
    DevicePtr up = c.region(1);
    int64_t n = z.rows * z.f;
    return {up, up + n, up + 2 * n, up + 3 * n};
  }

  /// F's up, gate and down maps over `in`, rows grouped by the `offsets`
  /// (the experts here), `count` of them: the pre-activations and
  /// activation into `x`, the outputs into `out`.
  static void runExperts(const SlotContext &c, const Sizes &z,
                         DevicePtr offsets, int64_t count, DevicePtr in,
                         const Hidden &x, DevicePtr out);
  /// B's over the same rows: `drows` the outputs' gradients; `dact` takes
  /// the activation's, `dgate` and `dup` the pre-activations' (kept for W),
  /// `din` the inputs'.
  static void expertsBackward(const SlotContext &c, const Sizes &z,
                              DevicePtr offsets, int64_t count, DevicePtr drows,
                              const Hidden &x, DevicePtr dact,
                              DevicePtr dgate, DevicePtr dup, DevicePtr din);

  /// Expert parallelism's part of the routing (region 0, after the shared
  /// gate's values): the copies sent to each expert, those received from
  /// each member for each local expert, each local expert's first row.
  struct DispatchInts {
    DevicePtr sent, received, offsets;
  };
  static DispatchInts getDispatchInts(const SlotContext &c, const Sizes &z,
                                      const Routing &r) {
    DevicePtr at = r.offsets + (z.experts + 1) + (z.gated ? z.rt : 0);
    return {at, at + z.experts, at + 2 * z.experts};
  }
  /// Expert parallelism's scratch (Shape.cpp's getScratchElements): the
  /// copies' rows on this member (F: their inputs; B: their input
  /// gradients returned), their output gradients before they leave, the
  /// all-to-all's rows in source order, the experts' rows in expert order
  /// (F: outputs; B: input gradients), the activation's gradient.
  struct Exchange {
    DevicePtr tokens, tokenGrads, source, experts, dact;
  };
  static Exchange getExchange(const SlotContext &c, const Sizes &z) {
    DevicePtr tokens = actAt(c, 2 * z.copies + 2 * z.rt * z.experts + 2 * z.rt);
    DevicePtr source = tokens + 2 * z.copies * z.h;
    return {tokens, tokens + z.copies * z.h, source, source + z.rows * z.h,
            source + 2 * z.rows * z.h};
  }

  /// One pass's dispatch: the all-to-all's element counts per member, the
  /// regrouping blocks, the rows received and the local experts' offsets
  /// on the device.
  struct Dispatch {
    std::vector<int64_t> send, recv;
    std::vector<ExpertDispatch::Block> blocks;
    int64_t received = 0;
    DevicePtr offsets;
    /// A member's experts received more copies than the plan sized them
    /// for (its capacity): every member of the group says so alike.
    bool refused = false;
  };
  /// Plans it from the routing's counts: F (`exchange`) tells every member
  /// its copies' counts and keeps what it received and the local offsets
  /// in the routing state; B reads them there. Below the dropless bound
  /// (ModelConfig::expertCapacity) the group first agrees whether any
  /// member overflows, so that all skip the rows' all-to-alls together.
  static Dispatch dispatch(const SlotContext &c, const Sizes &z,
                           const Routing &r, bool exchange) {
    const ExpertGroup &g = c.seams.getExperts();
    DispatchInts at = getDispatchInts(c, z, r);
    int64_t local = z.experts / z.members;
    std::vector<int32_t> offsets(size_t(z.experts + 1)), sent(size_t(z.experts)),
        received(size_t(z.experts));
    g.read(r.offsets, z.experts + 1, offsets.data());
    for (int64_t e = 0; e < z.experts; ++e)
      sent[size_t(e)] = offsets[size_t(e + 1)] - offsets[size_t(e)];
    if (exchange) {
      g.write(sent.data(), z.experts, at.sent);
      std::vector<int64_t> each(size_t(z.members), local);
      g.allToAll(at.sent, each, at.received, each);
    }
    g.read(at.received, z.experts, received.data());
    ExpertDispatch plan;
    std::string why = planExpertDispatch(
        std::vector<int64_t>(sent.begin(), sent.end()),
        std::vector<int64_t>(received.begin(), received.end()), z.members,
        g.member, z.rows, plan);
    bool sized = c.model.expertCapacity > 0;
    if (sized ? g.anyOf(!why.empty()) : !why.empty()) {
      Dispatch refused;
      refused.refused = true;
      g.fail(why.empty() ? "expert parallelism: another member of the "
                           "expert group received more token copies than "
                           "the plan's capacity (its rank says which)"
                         : why + "; the plan's --expert-capacity is " +
                               formatCapacity(c.model.expertCapacity) +
                               " (0: dropless)");
      return refused;
    }
    if (exchange) {
      std::vector<int32_t> first(plan.localOffsets.begin(),
                                 plan.localOffsets.end());
      g.write(first.data(), local + 1, at.offsets);
    }
    Dispatch d;
    for (int64_t rows : plan.sendRows)
      d.send.push_back(rows * z.h);
    for (int64_t rows : plan.recvRows)
      d.recv.push_back(rows * z.h);
    d.blocks = std::move(plan.blocks);
    d.received = plan.localOffsets.back();
    d.offsets = at.offsets;
    return d;
  }
  static std::string formatCapacity(double capacity) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", capacity);
    return text;
  }
  /// The received rows `source` (source-major) into `experts`
  /// (expert-major), or back.
  static void regroup(const SlotContext &c, const Sizes &z, const Dispatch &d,
                      DevicePtr source, DevicePtr experts, bool toExperts) {
    for (const ExpertDispatch::Block &b : d.blocks)
      if (toExperts)
        c.kernels.copy(experts + b.to * z.h, source + b.from * z.h,
                       b.rows * z.h);
      else
        c.kernels.copy(source + b.from * z.h, experts + b.to * z.h,
                       b.rows * z.h);
  }
  /// The scratch `elements` activation elements in, as fp32 or the
  /// activation type (fp32 parts come first, so each is 4-byte aligned).
  static DevicePtr f32At(const SlotContext &c, int64_t elements) {
    return c.scratch.atByte(elements * getSize(c.scratch.getType()),
                            DType::F32);
  }
  static DevicePtr actAt(const SlotContext &c, int64_t elements) {
    return c.scratch + elements;
  }
};

void MoeCompute::runExperts(const SlotContext &c, const Sizes &z,
                            DevicePtr offsets, int64_t count, DevicePtr in,
                            const Hidden &x, DevicePtr out) {
  Kernels &k = c.kernels;
  int64_t groups = z.experts / z.members;
  k.groupedGemm(false, groups, offsets, z.rows, z.f, z.h, in, z.h,
                c.weight("mlp.experts.up.weight"), z.f, z.h * z.f, 0.0f, x.up,
                z.f);
  k.groupedGemm(false, groups, offsets, z.rows, z.f, z.h, in, z.h,
                c.weight("mlp.experts.gate.weight"), z.f, z.h * z.f, 0.0f,
                x.gate, z.f);
  k.gatedForward(activation(c.model, c.layer), x.gate, x.up, x.act,
                 count * z.f);
  k.groupedGemm(false, groups, offsets, z.rows, z.h, z.f, x.act, z.f,
                c.weight("mlp.experts.down.weight"), z.h, z.f * z.h, 0.0f, out,
                z.h);
}

void MoeCompute::expertsBackward(const SlotContext &c, const Sizes &z,
                                 DevicePtr offsets, int64_t count,
                                 DevicePtr drows, const Hidden &x,
                                 DevicePtr dact, DevicePtr dgate, DevicePtr dup,
                                 DevicePtr din) {
  Kernels &k = c.kernels;
  int64_t groups = z.experts / z.members;
  k.groupedGemm(true, groups, offsets, z.rows, z.f, z.h, drows, z.h,
                c.weight("mlp.experts.down.weight"), z.h, z.f * z.h, 0.0f,
                dact, z.f);
  k.gatedBackward(activation(c.model, c.layer), x.gate, x.up, dact, dgate,
                  dup, count * z.f);
  k.groupedGemm(true, groups, offsets, z.rows, z.h, z.f, dup, z.f,
                c.weight("mlp.experts.up.weight"), z.f, z.h * z.f, 0.0f, din,
                z.h);
  k.groupedGemm(true, groups, offsets, z.rows, z.h, z.f, dgate, z.f,
                c.weight("mlp.experts.gate.weight"), z.f, z.h * z.f, 1.0f, din,
                z.h);
}

} // namespace

SLUICE_DEFINE_COMPUTE(moe, MoeCompute)

} // namespace sluice::rt::block
