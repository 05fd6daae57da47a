//===- Json.h - Parsing JSON a user's file holds ----------------*- C++ -*-===//
//
// nlohmann::json parses without recursion, but writing a value back
// (dump(), in an error message) recurses once per level: a value nested
// 100,000 deep in a plan, a manifest or a tokenizer.json overflowed the
// stack there (test/robustness/campaign.py found it). Every reader of a
// user's JSON parses through parseJson, which refuses a document nested
// deeper than any Sluice or Hugging Face file as a parse error (the
// exception or the discarded value the reader already handles).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_PLANFORMAT_JSON_H
#define SLUICE_PLANFORMAT_JSON_H

#include <nlohmann/json.hpp>

#include <string>

namespace sluice {

/// The deepest nesting a JSON input may have (Sluice's files nest 6
/// levels, Hugging Face's configs and tokenizers under 10).
constexpr int kMaxJsonDepth = 256;

/// nlohmann::json::parse(first, last) with a depth bound: a document
/// nested deeper than kMaxJsonDepth is a parse error -- thrown (as
/// nlohmann's parse_error) with `allowExceptions` where exceptions are on,
/// else a discarded value.
template <typename Iterator>
nlohmann::json parseJson(Iterator first, Iterator last,
                         bool allowExceptions = true) {
  bool tooDeep = false;
  auto bound = [&](int depth, nlohmann::json::parse_event_t,
                   nlohmann::json &) {
    tooDeep |= depth > kMaxJsonDepth;
    return !tooDeep;
  };
  nlohmann::json value = nlohmann::json::parse(first, last, bound, false);
#if defined(__cpp_exceptions)
  if (tooDeep && allowExceptions)
    throw nlohmann::json::parse_error::create(
        101, 0,
        "the document nests deeper than " + std::to_string(kMaxJsonDepth) +
            " levels",
        nullptr);
  // Not too deep, but not JSON: the parser's own error, with its place.
  if (value.is_discarded() && allowExceptions)
    return nlohmann::json::parse(first, last);
#endif
  if (tooDeep)
    return nlohmann::json(nlohmann::json::value_t::discarded);
  return value;
}

inline nlohmann::json parseJson(const std::string &text,
                                bool allowExceptions = true) {
  return parseJson(text.begin(), text.end(), allowExceptions);
}

} // namespace sluice

#endif // SLUICE_PLANFORMAT_JSON_H
