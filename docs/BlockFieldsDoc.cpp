//===- BlockFieldsDoc.cpp - The block spec's reference, from its table ----===//
//
// Prints docs/generated/BlockFields.md: every row of
// include/sluice/PlanFormat/BlockFields.def -- its key, the layers that
// carry it, its values, its default, whether plans and the IR state it,
// what it means -- so the reference is the table, as the op and pass
// references are ODS (docs/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#include "sluice/Blocks/Spec.h"

#include <iostream>
#include <sstream>
#include <string>

namespace {

using namespace sluice::rt;

enum Presence { Required, Written, Optional };

std::string kinds(unsigned bits) {
  std::string out;
  for (auto [bit, name] : {std::pair{unsigned(kEmbedding), "embedding"},
                           std::pair{unsigned(kTransformer), "transformer"},
                           std::pair{unsigned(kOutput), "output"}})
    if (bits & bit)
      out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

std::string values(const std::string &type, const std::string &key) {
  if (type == "Choice") {
    std::string names;
    for (const std::string &name : sluice::blocks::getChoices(key))
      names += (names.empty() ? "`" : " \\| `") + name + "`";
    return names;
  }
  if (type == "Size")
    return "an integer of at least 1";
  if (type == "Count")
    return "an integer of at least 0";
  if (type == "Real")
    return "a positive number";
  if (type == "Flag")
    return "`true` \\| `false` (IR: the key alone is true)";
  if (type == "Norm")
    return "`layernorm` \\| `rmsnorm`";
  if (type == "Mlp")
    return "`gelu` \\| `swiglu` \\| `geglu`";
  if (type == "Rotary")
    return "`rope_theta`: a positive number; `rope_scaling`: "
           "`llama3<factor, low_freq_factor, high_freq_factor, "
           "original_max_positions>` \\| `linear<factor>` (plans: "
           "transformers' object)";
  if (type == "Names")
    return "a list of registered feature names";
  return type;
}

template <class T> std::string show(const T &value) {
  std::ostringstream os;
  os << value;
  return "`" + os.str() + "`";
}
std::string show(bool value) { return value ? "`true`" : "`false`"; }
std::string show(const char *value) { return std::string("`") + value + "`"; }
std::string show(NormType value) { return show(getName(value)); }
std::string show(MlpType value) { return show(getName(value)); }
std::string show(const Rotary &) { return "none"; }
std::string show(const Names &) { return "none"; }

} // namespace

int main() {
  std::cout
      << "<!-- Generated from include/sluice/PlanFormat/BlockFields.def by "
         "docs/BlockFieldsDoc.cpp: edit the table, not this page. -->\n\n"
      << "# The block spec's fields\n\n"
      << "One row of `include/sluice/PlanFormat/BlockFields.def` each: the "
         "struct member (`rt::LayerConfig`), the plan's key "
         "(docs/plan-format.md), the entry in `sluice.transformer_layer`'s "
         "braces (SluiceDialect.md) and the rules `checkLayer` holds it to "
         "all come from it. *Required*: every plan and layer op states it; "
         "*written*: plans state it, the IR when it is not the default; "
         "*optional*: stated when it is not the default.\n\n"
      << "| key | layers | values | default | stated | meaning |\n"
      << "|---|---|---|---|---|---|\n";
#define SLUICE_BLOCK_FIELD(KINDS, TYPE, MEMBER, KEY, DEFAULT, PRESENCE, DOC)  \
  std::cout << "| `" << KEY << "` | " << kinds(KINDS) << " | "                 \
            << values(#TYPE, KEY) << " | " << show(DEFAULT) << " | "           \
            << (PRESENCE == Required  ? "required"                            \
                : PRESENCE == Written ? "written"                             \
                                      : "optional")                           \
            << " | " << DOC << " |\n";
  {
    using namespace sluice::rt;
#include "sluice/PlanFormat/BlockFields.def"
  }
  return 0;
}
