//===- JsonDepth.h - How deep a JSON text nests -----------------*- C++ -*-===//
//
// LLVM's JSON parser descends one call per nesting level, so a 100 KB file
// of brackets exhausts the stack; a file is measured before it is parsed.
// Real configs, profiles and plans nest a handful of levels.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_PLANFORMAT_JSONDEPTH_H
#define SLUICE_PLANFORMAT_JSONDEPTH_H

#include <cstddef>
#include <string>
#include <string_view>

namespace sluice {

/// The deepest a JSON file Sluice reads may nest.
constexpr int kMaxJsonDepth = 256;

/// Whether `text`'s arrays and objects nest at most `limit` deep (brackets
/// inside strings do not count); if not, `error` says where it goes past.
inline bool checkJsonDepth(std::string_view text, std::string &error,
                           int limit = kMaxJsonDepth) {
  int depth = 0;
  bool inString = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) {
        error = "nests deeper than " + std::to_string(limit) +
                " levels (at byte " + std::to_string(i) + ")";
        return false;
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

} // namespace sluice

#endif // SLUICE_PLANFORMAT_JSONDEPTH_H
