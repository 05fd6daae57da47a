//===- TinyPlans.h - Hand-written plans for runtime tests -------*- C++ -*-===//
//
// Plans small enough to write by hand, with the buffer sizes the runtime's
// layout gives, for tests of what the compiler never emits.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_TEST_UNITTESTS_TINYPLANS_H
#define SLUICE_TEST_UNITTESTS_TINYPLANS_H

#include "sluice/PlanFormat/Format.h"
#include "sluice/Blocks/Layout.h"

#include <nlohmann/json.hpp>

#include <string>

namespace sluice::rt {

/// Two stages, two microbatches, F and BW; device 0 writes microbatch 1's
/// activation into the slot microbatch 0's is being sent from.
inline std::string planReusingASentSlot() {
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

} // namespace sluice::rt

#endif // SLUICE_TEST_UNITTESTS_TINYPLANS_H
