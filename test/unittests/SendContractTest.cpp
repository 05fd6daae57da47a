//===- SendContractTest.cpp - Sends copy nothing; the executor waits ------===//
//
// The runtime half of the plan-buffers contract (docs/plan-format.md):
// a send reads its slot until it completes, so the executor must wait for
// it before any instruction writes that slot again. A hand-written plan
// reuses a sent slot at once; a communicator that reads a send's data only
// when it completes sees whether the executor waited.
//
//===----------------------------------------------------------------------===//

#include "CpuDevice.h"
#include "Executor.h"
#include "sluice/PlanFormat/Layout.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>

using namespace sluice::rt;

namespace {

/// Delivers a send's data when the send completes, as a transport that
/// reads lazily (an MPI rendezvous) does; receives get zeros.
class LazyCommunicator final : public Communicator {
public:
  struct Sent {
    std::vector<float> posted, delivered;
  };
  std::vector<Sent> sent;

  class LazyRequest final : public Request {
  public:
    LazyRequest(LazyCommunicator *owner, size_t index, DevicePtr data,
                int64_t count)
        : owner(owner), index(index), data(data), count(count) {}
    /// Completes on the third test (or a wait): late enough that an
    /// executor which merely polls once before writing the slot is caught.
    bool test() override {
      if (++tests >= 3)
        complete();
      return done;
    }
    Status waitOn(Stream &) override {
      complete();
      return Status::ok();
    }

  private:
    void complete() {
      if (owner && !done) {
        const float *p = data.f32();
        owner->sent[index].delivered.assign(p, p + count);
      }
      done = true;
    }
    LazyCommunicator *owner;
    size_t index;
    DevicePtr data;
    int64_t count;
    int tests = 0;
    bool done = false;
  };

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::unique_ptr<Request> sendAsync(DevicePtr data, int64_t count, int, int,
                                     Stream &) override {
    const float *p = data.f32();
    sent.push_back({std::vector<float>(p, p + count), {}});
    return std::make_unique<LazyRequest>(this, sent.size() - 1, data, count);
  }
  std::unique_ptr<Request> recvAsync(DevicePtr data, int64_t count, int, int,
                                     Stream &) override {
    std::memset(data.get(), 0, size_t(count) * sizeof(float));
    return std::make_unique<LazyRequest>(nullptr, 0, data, count);
  }
  int maxTag() const override { return 1 << 20; }
  std::unique_ptr<Request> broadcastAsync(DevicePtr, int64_t, int, int,
                                          Stream &) override {
    return nullptr;
  }
  std::unique_ptr<Request> allReduceAsync(DevicePtr, int64_t, Reduction, int,
                                          Stream &) override {
    return nullptr;
  }
  std::unique_ptr<Request> reduceSumAsync(DevicePtr, int64_t, int, int,
                                          Stream &) override {
    return nullptr;
  }
  Status allReduceSum(DevicePtr, int64_t, const int *, int, Stream &) override {
    return Status::ok();
  }
  Status allReduceSum(double *, int64_t) override { return Status::ok(); }
  Status allReduceMax(double *, int64_t) override { return Status::ok(); }
  Status gatherToRoot(const std::string &,
                      std::vector<std::string> &) override {
    return Status::ok();
  }
  void barrier() override {}
  [[noreturn]] void abort(int) override { std::abort(); }
};

/// Two stages, two microbatches, F and BW; device 0 writes microbatch 1's
/// activation into the slot microbatch 0's is being sent from.
std::string planReusingASentSlot() {
  ModelConfig model;
  model.seqLen = 8;
  model.microBatch = 1;
  model.hidden = 16;
  LayerConfig emb, t, out;
  emb.kind = LayerKind::Embedding;
  emb.vocab = 11;
  t.kind = LayerKind::Transformer;
  t.heads = 2, t.kvHeads = 2, t.headDim = 8, t.ffn = 32;
  out.kind = LayerKind::Output;
  out.vocab = 11;
  model.layers = {emb, t, out};
  Precision fp32 = Precision::fp32();
  SliceShape s{1, 8, 0};
  int64_t state0 = getForwardStateBytes(model, {0, 1}, s, fp32),
          wstate0 = getWeightStateBytes(model, {0, 1}, s, fp32),
          kv0 = getKeyValueBytes(model, {0, 1}, 1, fp32),
          state1 = getForwardStateBytes(model, {2}, s, fp32),
          wstate1 = getWeightStateBytes(model, {2}, s, fp32),
          message = getMessageBytes(model, s, fp32);
  using nlohmann::json;
  auto exec = [](const char *pass, int stage, int mb, json slots) {
    json j = {{"op", "exec"}, {"pass", pass}, {"stage", stage}, {"mb", mb},
              {"slice", 0},   {"state", -1},  {"wstate", -1},   {"kv", -1},
              {"in", -1},     {"out", -1}};
    j.update(slots);
    return j;
  };
  auto transfer = [](const char *op, const char *pass, int stage, int mb,
                     int peer, int key, int buffer) {
    return json{{"op", op},   {"pass", pass},     {"stage", stage},
                {"mb", mb},   {"slice", 0},       {"peer", peer},
                {"key", key}, {"buffer", buffer}, {"stream", "comm"}};
  };
  json device0 = {
      {"device", 0},
      {"buffers", {state0, kv0, message, state0, kv0, message, wstate0}},
      {"instructions",
       {exec("F", 0, 0, {{"state", 0}, {"kv", 1}, {"out", 2}}),
        transfer("send", "F", 0, 0, 1, 0, 2),
        // Slot 2 again, while microbatch 0's send may still read it.
        exec("F", 0, 1, {{"state", 3}, {"kv", 4}, {"out", 2}}),
        transfer("send", "F", 0, 1, 1, 1, 2),
        transfer("recv", "BW", 1, 0, 1, 2, 5),
        exec("BW", 0, 0, {{"state", 0}, {"kv", 1}, {"in", 5}, {"wstate", 6}}),
        transfer("recv", "BW", 1, 1, 1, 3, 5),
        exec("BW", 0, 1,
             {{"state", 3}, {"kv", 4}, {"in", 5}, {"wstate", 6}})}}};
  json device1 = {{"device", 1},
                  {"buffers", {message, state1, wstate1, message}},
                  {"instructions",
                   {transfer("recv", "F", 0, 0, 0, 0, 0),
                    exec("F", 1, 0, {{"in", 0}, {"state", 1}}),
                    exec("BW", 1, 0, {{"state", 1}, {"wstate", 2}, {"out", 3}}),
                    transfer("send", "BW", 1, 0, 0, 2, 3),
                    transfer("recv", "F", 0, 1, 0, 1, 0),
                    exec("F", 1, 1, {{"in", 0}, {"state", 1}}),
                    exec("BW", 1, 1, {{"state", 1}, {"wstate", 2}, {"out", 3}}),
                    transfer("send", "BW", 1, 1, 0, 3, 3)}}};
  json layers = json::array();
  layers.push_back({{"kind", "embedding"}, {"vocab", 11}, {"positions", 0}});
  layers.push_back({{"kind", "transformer"},
                    {"heads", 2},
                    {"kv_heads", 2},
                    {"head_dim", 8},
                    {"ffn", 32},
                    {"mlp", "gelu"},
                    {"bias", false},
                    {"norm", "layernorm"}});
  layers.push_back({{"kind", "output"},
                    {"vocab", 11},
                    {"norm", "layernorm"},
                    {"tied", false}});
  json plan = {
      {"format", "sluice-plan"},
      {"version", kPlanVersion},
      {"precision", "fp32"},
      {"model",
       {{"name", "tiny"},
        {"seq_len", 8},
        {"micro_batch", 1},
        {"hidden", 16},
        {"layers", layers}}},
      {"schedule", "1f1b"},
      {"devices", 2},
      {"microbatches", 2},
      {"slices", {8}},
      {"split_backward", false},
      {"stages",
       {{{"name", "s0"}, {"device", 0}, {"chunk", 0}, {"layers", {0, 1}}},
        {{"name", "s1"}, {"device", 1}, {"chunk", 0}, {"layers", {2}}}}},
      {"programs", {device0, device1}}};
  return plan.dump();
}

TEST(SendContract, AWrittenSlotWaitsForItsSend) {
  Plan plan;
  Status parsed = parsePlan(planReusingASentSlot(), "hand-written", plan);
  ASSERT_TRUE(parsed.isOk()) << parsed.message();
  CpuDevice device;
  LazyCommunicator comm;
  std::unique_ptr<TokenSource> data = makeSyntheticTokens(1, 11, 2);
  TrainerOptions options;
  Executor executor(plan, 0, device, comm, *data, options);
  ASSERT_TRUE(executor.prepare());
  double loss = 0;
  ASSERT_TRUE(executor.runStep(0, loss));
  ASSERT_EQ(comm.sent.size(), 2u);
  for (const LazyCommunicator::Sent &s : comm.sent) {
    ASSERT_EQ(s.delivered.size(), s.posted.size());
    EXPECT_EQ(s.delivered, s.posted)
        << "a slot was written while its send was still reading it";
  }
  // The two microbatches' activations differ: the check can fail.
  EXPECT_NE(comm.sent[0].posted, comm.sent[1].posted);
}

} // namespace
