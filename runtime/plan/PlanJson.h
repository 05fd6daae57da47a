//===- PlanJson.h - What the plan reader and validator share -----*- C++ -*-===//
//
// Private to runtime/plan: the error the reader and the validator throw
// inside (parsePlan turns it into one Status at the boundary), the JSON
// field readers that name what they read, and the two halves of loading a
// plan -- readPlan (PlanReader.cpp) fills every field, validate
// (PlanValidator.cpp) proves the whole.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_PLAN_PLANJSON_H
#define SLUICE_RUNTIME_PLAN_PLANJSON_H

#include "Plan.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace sluice::rt::planfile {

using nlohmann::json;

/// Thrown inside the parser, turned into one Status at the boundary.
struct PlanError {
  std::string message;
};

[[noreturn]] inline void fail(const std::string &message) { throw PlanError{message}; }

inline const json &field(const json &object, const char *name,
                  const std::string &where) {
  if (!object.is_object() || !object.contains(name))
    fail(where + " has no '" + name + "'");
  return object.at(name);
}

/// `value` as an integer in [min, max]; `what` names it in the error. A
/// float, or an integer out of int64_t's range, is refused before any
/// conversion (converting them is undefined; found by sluice-fuzz-plan).
inline int64_t integerValue(const json &value, const std::string &what, int64_t min,
                     int64_t max) {
  if (!value.is_number_integer() ||
      (value.is_number_unsigned() &&
       value.get<uint64_t>() > uint64_t(INT64_MAX)))
    fail(what + " must be an integer, got " + value.dump());
  int64_t v = value.get<int64_t>();
  if (v < min)
    fail(what + " must be at least " + std::to_string(min) + ", got " +
         std::to_string(v));
  if (v > max)
    fail(what + " must be at most " + std::to_string(max) + ", got " +
         std::to_string(v));
  return v;
}

inline int64_t integer(const json &object, const char *name, const std::string &where,
                int64_t min = 0, int64_t max = INT64_MAX) {
  return integerValue(field(object, name, where), where + ": '" + name + "'",
                      min, max);
}

/// An integer field the runtime keeps in an int (devices, indices, counts).
inline int integer32(const json &object, const char *name, const std::string &where,
              int64_t min = 0) {
  return int(integerValue(field(object, name, where),
                          where + ": '" + name + "'", min, INT32_MAX));
}

inline std::string text(const json &object, const char *name,
                 const std::string &where) {
  const json &value = field(object, name, where);
  if (!value.is_string())
    fail(where + ": '" + name + "' must be a string, got " + value.dump());
  return value.get<std::string>();
}

inline bool flag(const json &object, const char *name, const std::string &where) {
  const json &value = field(object, name, where);
  if (!value.is_boolean())
    fail(where + ": '" + name + "' must be true or false, got " + value.dump());
  return value.get<bool>();
}

/// Reads every field of the plan in `j` (then validate() checks the
/// whole).
void readPlan(const json &j, Plan &plan);
/// Proves the whole plan: its layout, each instruction, then what only the
/// whole plan shows.
void validate(Plan &plan);

} // namespace sluice::rt::planfile

#endif // SLUICE_RUNTIME_PLAN_PLANJSON_H
