//===- BlockSpecAsm.cpp - The transformer block's spec in the IR ----------===//
//
// `sluice.transformer_layer`'s braces: each BlockFields.def row of the
// transformer kind through its TYPE's assembly. Entries are `key = value`
// (a flag: its key alone, or `key = false` where the default is true), in
// any order, each once; the printer writes them in the table's order, the
// required ones always and the rest when they differ from the default.
// The rules on the values are checkLayer's (the verifier), except a size
// stated as 0 or less, which the parser refuses because 0 stands for
// "absent" in the struct.
//
//===----------------------------------------------------------------------===//

#include "sluice/SluiceOps.h"

#include "sluice/Blocks/Spec.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mlir::sluice;

namespace rt = ::sluice::rt;
namespace field = ::sluice::rt::field;

namespace {

enum Presence { Required, Written, Optional };

/// Prints `, ` before every entry but the first.
class Entries {
public:
  explicit Entries(OpAsmPrinter &printer) : printer(printer) {}
  OpAsmPrinter &next(const char *key) {
    if (!first)
      printer << ", ";
    first = false;
    return printer << key;
  }

private:
  OpAsmPrinter &printer;
  bool first = true;
};

/// A TYPE's assembly: whether it owns `key`, parse after the key, print.
template <class Tag> struct Asm;

template <> struct Asm<field::Size> {
  static bool owns(StringRef key, const char *rowKey) { return key == rowKey; }
  static ParseResult parse(OpAsmParser &parser, SMLoc loc, StringRef key,
                           int64_t &value) {
    if (parser.parseEqual() || parser.parseInteger(value))
      return failure();
    if (value < 1)
      return parser.emitError(loc, "'")
             << key << "' must be positive, got " << value;
    return success();
  }
  static void print(Entries &out, const char *key, bool always, int64_t value,
                    int64_t fallback) {
    if (always || value != fallback)
      out.next(key) << " = " << value;
  }
};

template <> struct Asm<field::Count> {
  static bool owns(StringRef key, const char *rowKey) { return key == rowKey; }
  static ParseResult parse(OpAsmParser &parser, SMLoc, StringRef,
                           int64_t &value) {
    return failure(parser.parseEqual() || parser.parseInteger(value));
  }
  static void print(Entries &out, const char *key, bool always, int64_t value,
                    int64_t fallback) {
    if (always || value != fallback)
      out.next(key) << " = " << value;
  }
};

/// The shortest decimal that reads back as `value` (0.02, not
/// 2.000000e-02 or 0.0200000000000000004).
std::string shortest(double value) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  return text;
}

template <> struct Asm<field::Real> {
  static bool owns(StringRef key, const char *rowKey) { return key == rowKey; }
  static ParseResult parse(OpAsmParser &parser, SMLoc loc, StringRef key,
                           double &value) {
    if (parser.parseEqual() || parser.parseFloat(value))
      return failure();
    if (!(value > 0) || !std::isfinite(value))
      return parser.emitError(loc, "'")
             << key << "' must be a positive number, got " << value;
    return success();
  }
  static void print(Entries &out, const char *key, bool always, double value,
                    double fallback) {
    if (always || value != fallback)
      out.next(key) << " = " << shortest(value);
  }
};

template <> struct Asm<field::Flag> {
  static bool owns(StringRef key, const char *rowKey) { return key == rowKey; }
  static ParseResult parse(OpAsmParser &parser, SMLoc, StringRef key,
                           bool &value) {
    value = true;
    if (failed(parser.parseOptionalEqual()))
      return success();
    SMLoc at = parser.getCurrentLocation();
    StringRef word;
    if (parser.parseKeyword(&word))
      return failure();
    if (word != "true" && word != "false")
      return parser.emitError(at, "'")
             << key << "' must be true or false, got '" << word << "'";
    value = word == "true";
    return success();
  }
  static void print(Entries &out, const char *key, bool, bool value,
                    bool fallback) {
    if (value == fallback)
      return;
    OpAsmPrinter &p = out.next(key);
    if (!value)
      p << " = false";
  }
};

/// An enum spelled by rt::getName, read by `parse`.
template <class Enum, bool (*parseName)(const std::string &, Enum &),
          Enum... values>
struct EnumAsm {
  static bool owns(StringRef key, const char *rowKey) { return key == rowKey; }
  static ParseResult parse(OpAsmParser &parser, SMLoc, StringRef key,
                           Enum &value) {
    SMLoc at = parser.getCurrentLocation();
    StringRef word;
    if (parser.parseEqual() || parser.parseKeyword(&word))
      return failure();
    if (parseName(word.str(), value))
      return success();
    std::string expected;
    for (Enum e : {values...})
      expected += (expected.empty() ? "" : ", ") + std::string(rt::getName(e));
    return parser.emitError(at, "unknown ")
           << key << " '" << word << "' (expected " << expected << ")";
  }
  static void print(Entries &out, const char *key, bool always, Enum value,
                    Enum fallback) {
    if (always || value != fallback)
      out.next(key) << " = " << rt::getName(value);
  }
};
template <>
struct Asm<field::Norm>
    : EnumAsm<rt::NormType, rt::parseNormType, rt::NormType::LayerNorm,
              rt::NormType::RmsNorm> {};
template <>
struct Asm<field::Mlp>
    : EnumAsm<rt::MlpType, rt::parseMlpType, rt::MlpType::Gelu,
              rt::MlpType::SwiGlu, rt::MlpType::GeGlu> {};
/// One of the names its key's SLUICE_BLOCK_CHOICES lists, as a keyword.
template <> struct Asm<field::Choice> {
  static bool owns(StringRef key, const char *rowKey) { return key == rowKey; }
  static ParseResult parse(OpAsmParser &parser, SMLoc, StringRef key,
                           std::string &value) {
    SMLoc at = parser.getCurrentLocation();
    StringRef word;
    if (parser.parseEqual() || parser.parseKeyword(&word))
      return failure();
    const std::vector<std::string> &names =
        ::sluice::blocks::getChoices(key.str());
    if (llvm::is_contained(names, word.str())) {
      value = word.str();
      return success();
    }
    return parser.emitError(at, "unknown ")
           << key << " '" << word << "' (expected " << llvm::join(names, ", ")
           << ")";
  }
  static void print(Entries &out, const char *key, bool always,
                    const std::string &value, const std::string &fallback) {
    if (always || value != fallback)
      out.next(key) << " = " << value;
  }
};

/// A real number as the IR has always printed a base (10000.0): integral
/// values as written, the rest in MLIR's float form.
void printReal(OpAsmPrinter &printer, double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15)
    printer << static_cast<int64_t>(value) << ".0";
  else
    printer.printFloat(APFloat(value));
}

/// Rotary positions: `rope_theta = <float>` and `rope_scaling =
/// llama3<factor = f, low_freq_factor = l, high_freq_factor = h,
/// original_max_positions = n>`, `linear<factor = f>` or `yarn<factor =
/// f, original_max_positions = n, beta_fast = b, beta_slow = b,
/// attention_factor = a>`.
template <> struct Asm<field::Rotary> {
  static bool owns(StringRef key, const char *) {
    return key == "rope_theta" || key == "rope_scaling";
  }
  static ParseResult parse(OpAsmParser &parser, SMLoc, StringRef key,
                           rt::Rotary &rope) {
    if (parser.parseEqual())
      return failure();
    if (key == "rope_theta") {
      SMLoc at = parser.getCurrentLocation();
      if (parser.parseFloat(rope.theta))
        return failure();
      // 0 stands for "no rotary positions" in the struct.
      if (!(rope.theta > 0))
        return parser.emitError(at, "'rope_theta' must be positive, got ")
               << rope.theta;
      return success();
    }
    SMLoc at = parser.getCurrentLocation();
    StringRef type;
    if (parser.parseKeyword(&type))
      return failure();
    if (type != "llama3" && type != "linear" && type != "yarn")
      return parser.emitError(at, "unknown rope_scaling '")
             << type << "' (expected llama3, linear or yarn)";
    rope.linear = type == "linear";
    rope.yarn = type == "yarn";
    llvm::StringSet<> seen;
    auto entry = [&]() -> ParseResult {
      SMLoc where = parser.getCurrentLocation();
      StringRef name;
      if (parser.parseKeyword(&name) || parser.parseEqual())
        return failure();
      seen.insert(name);
      if (name == "factor")
        return parser.parseFloat(rope.factor);
      if (rope.yarn && name == "original_max_positions")
        return parser.parseInteger(rope.originalPositions);
      if (rope.yarn && name == "beta_fast")
        return parser.parseFloat(rope.betaFast);
      if (rope.yarn && name == "beta_slow")
        return parser.parseFloat(rope.betaSlow);
      if (rope.yarn && name == "attention_factor")
        return parser.parseFloat(rope.magnitude);
      if (rope.yarn)
        return parser.emitError(where, "unknown ")
               << type << " rope_scaling parameter '" << name << "'";
      if (!rope.linear && name == "low_freq_factor")
        return parser.parseFloat(rope.lowFreqFactor);
      if (!rope.linear && name == "high_freq_factor")
        return parser.parseFloat(rope.highFreqFactor);
      if (!rope.linear && name == "original_max_positions")
        return parser.parseInteger(rope.originalPositions);
      return parser.emitError(where, "unknown ")
             << type << " rope_scaling parameter '" << name << "'";
    };
    if (parser.parseCommaSeparatedList(AsmParser::Delimiter::LessGreater,
                                       entry))
      return failure();
    std::vector<const char *> needed = {"factor"};
    if (rope.yarn)
      needed.insert(needed.end(), {"original_max_positions", "beta_fast",
                                   "beta_slow", "attention_factor"});
    else if (!rope.linear)
      needed.insert(needed.end(), {"low_freq_factor", "high_freq_factor",
                                   "original_max_positions"});
    for (const char *name : needed)
      if (!seen.contains(name))
        return parser.emitError(at, "rope_scaling ")
               << type << " has no '" << name << "'";
    return success();
  }
  static void print(Entries &out, const char *, bool, const rt::Rotary &rope,
                    const rt::Rotary &) {
    if (rope.theta != 0)
      printReal(out.next("rope_theta") << " = ", rope.theta);
    if (!rope.isScaled())
      return;
    OpAsmPrinter &p = out.next("rope_scaling")
                      << " = " << rope.getScalingName() << "<factor = ";
    p.printFloat(APFloat(rope.factor));
    if (rope.yarn) {
      p << ", original_max_positions = " << rope.originalPositions
        << ", beta_fast = ";
      p.printFloat(APFloat(rope.betaFast));
      p << ", beta_slow = ";
      p.printFloat(APFloat(rope.betaSlow));
      p << ", attention_factor = ";
      p.printFloat(APFloat(rope.magnitude));
    } else if (!rope.linear) {
      p << ", low_freq_factor = ";
      p.printFloat(APFloat(rope.lowFreqFactor));
      p << ", high_freq_factor = ";
      p.printFloat(APFloat(rope.highFreqFactor));
      p << ", original_max_positions = " << rope.originalPositions;
    }
    p << ">";
  }
};

template <> struct Asm<field::Names> {
  static bool owns(StringRef key, const char *rowKey) { return key == rowKey; }
  static ParseResult parse(OpAsmParser &parser, SMLoc, StringRef,
                           rt::Names &names) {
    if (parser.parseEqual())
      return failure();
    names.clear();
    return parser.parseCommaSeparatedList(
        AsmParser::Delimiter::Square, [&]() -> ParseResult {
          std::string name;
          if (parser.parseString(&name))
            return failure();
          names.push_back(name);
          return success();
        });
  }
  static void print(Entries &out, const char *key, bool,
                    const rt::Names &names, const rt::Names &) {
    if (names.empty())
      return;
    OpAsmPrinter &p = out.next(key) << " = [";
    llvm::interleaveComma(names, p, [&](const std::string &name) {
      p << '"';
      llvm::printEscapedString(name, p.getStream());
      p << '"';
    });
    p << "]";
  }
};

} // namespace

ParseResult mlir::sluice::parseBlockSpec(OpAsmParser &parser,
                                         rt::LayerConfig &spec) {
  spec = rt::LayerConfig();
  spec.kind = rt::LayerKind::Transformer;
  SMLoc start = parser.getCurrentLocation();
  llvm::StringSet<> seen;
  using namespace rt;
  auto entry = [&]() -> ParseResult {
    SMLoc loc = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key))
      return failure();
    if (!seen.insert(key).second)
      return parser.emitError(loc, "'") << key << "' is given twice";
#define SLUICE_BLOCK_FIELD(KINDS, TYPE, MEMBER, KEY, DEFAULT, PRESENCE, DOC)  \
  if (((KINDS) & rt::kTransformer) && Asm<field::TYPE>::owns(key, KEY))       \
    return Asm<field::TYPE>::parse(parser, loc, key, spec.MEMBER);
#include "sluice/PlanFormat/BlockFields.def"
    return parser.emitError(loc, "unknown key '")
           << key << "' in a transformer layer's spec (expected one of "
           << llvm::join(::sluice::blocks::getKeys(rt::LayerKind::Transformer),
                         ", ")
           << ")";
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, entry))
    return failure();
#define SLUICE_BLOCK_FIELD(KINDS, TYPE, MEMBER, KEY, DEFAULT, PRESENCE, DOC)  \
  if (((KINDS) & rt::kTransformer) && PRESENCE == Required &&                 \
      !seen.contains(KEY))                                                    \
    return parser.emitError(start, "the spec has no '") << KEY << "'";
#include "sluice/PlanFormat/BlockFields.def"
  return success();
}

void mlir::sluice::printBlockSpec(OpAsmPrinter &printer, Operation *,
                                  const rt::LayerConfig &spec) {
  printer << "{";
  Entries entries(printer);
  {
    using namespace rt;
#define SLUICE_BLOCK_FIELD(KINDS, TYPE, MEMBER, KEY, DEFAULT, PRESENCE, DOC)  \
  if ((KINDS) & rt::kTransformer)                                             \
    Asm<field::TYPE>::print(entries, KEY, PRESENCE == Required, spec.MEMBER,  \
                            field::TYPE::type(DEFAULT));
#include "sluice/PlanFormat/BlockFields.def"
  }
  printer << "}";
}

Attribute mlir::convertToAttribute(MLIRContext *context,
                                   const rt::LayerConfig &spec) {
  return StringAttr::get(context, ::sluice::blocks::printLayer(spec));
}

LogicalResult
mlir::convertFromAttribute(rt::LayerConfig &spec, Attribute attr,
                           function_ref<InFlightDiagnostic()> emitError) {
  auto text = dyn_cast<StringAttr>(attr);
  std::string why = text ? ::sluice::blocks::parseLayer(text.str(), spec)
                         : "a block spec is a string attribute";
  if (why.empty())
    return success();
  if (emitError)
    emitError() << "invalid block spec: " << why;
  return failure();
}

llvm::hash_code mlir::sluice::hashBlockSpec(const rt::LayerConfig &spec) {
  return llvm::hash_value(::sluice::blocks::printLayer(spec));
}
