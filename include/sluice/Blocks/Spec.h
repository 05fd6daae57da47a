//===- Spec.h - A layer's spec as plans hold it, and its rules --*- C++ -*-===//
//
// What BlockFields.def generates beside the struct: a layer's JSON object
// (the plan writer and the plan reader share it), and checkLayer, the one
// place each rule on a spec is written -- the dialect's verifier and the
// plan reader both call it, so a rule has one message.
//
// Plain C++ over nlohmann-json, no LLVM or MLIR: the runtime links it.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_BLOCKS_SPEC_H
#define SLUICE_BLOCKS_SPEC_H

#include "sluice/PlanFormat/ModelConfig.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace sluice::blocks {

using rt::LayerConfig;
using rt::LayerKind;
using rt::ModelConfig;

/// `layer`'s object in a plan's model.layers[], its "kind" first, then
/// its fields in the table's order.
nlohmann::ordered_json writeLayer(const LayerConfig &layer);

/// Reads a plan's layer object into `layer`, whose kind the caller has
/// set (a layer's kind follows from its place): every field of the kind,
/// defaults for the absent optional ones. "" or why not; a key no field
/// of the kind has is refused by name.
std::string readLayer(const nlohmann::json &object, LayerConfig &layer);

/// writeLayer's object as text, and a layer read back from it, its kind
/// from its "kind" (the dialect's attribute form of a spec).
std::string printLayer(const LayerConfig &layer);
std::string parseLayer(const std::string &text, LayerConfig &layer);

/// The names a Choice field `key` takes (SLUICE_BLOCK_CHOICES), its
/// default first; none for another key.
const std::vector<std::string> &getChoices(const std::string &key);

/// The plan keys of `kind`'s fields, in table order.
std::vector<std::string> getKeys(LayerKind kind);

/// The keys of `layer`'s feature fields that differ from their defaults
/// (every transformer field but the block's shape: heads, kv_heads,
/// head_dim, ffn, norm and mlp), rotary positions as `rope_theta` and, when
/// scaled, `rope_scaling`, a choice's with its name (`key = name`): what
/// a Hugging Face family's config must be able to say to describe the
/// layer.
std::vector<std::string> getStatedKeys(const LayerConfig &layer);

/// Why `layer`, in a model of width `hidden`, is not a spec any runtime
/// computes, or "": sizes, heads, rotary positions, exclusive features,
/// registered feature names, and each enabled feature's own rules. One
/// message per rule, naming the field and its value.
std::string checkLayer(const LayerConfig &layer, int64_t hidden);

/// A transformer layer's head size: head_dim, or hidden / heads when it
/// is not stated.
int64_t getHeadDim(const LayerConfig &layer, int64_t hidden);
/// Its value heads' size: v_head_dim, or getHeadDim when it is not stated.
int64_t getValueHeadDim(const LayerConfig &layer, int64_t hidden);

} // namespace sluice::blocks

#endif // SLUICE_BLOCKS_SPEC_H
