//===- ConfigJson.cpp - A config.json's keys for the families -------------===//

#include "ConfigJson.h"

#include <cmath>
#include <cstdint>

namespace sluice::rt {

using json = nlohmann::json;

namespace {
/// A whole number, as sluice-compile's importer (LLVM's JSON) takes one:
/// 4 or 4.0, within int64's range.
std::optional<int64_t> asInteger(const json &value) {
  if (value.is_number_unsigned())
    return value.get<uint64_t>() <= uint64_t(INT64_MAX)
               ? std::optional<int64_t>(int64_t(value.get<uint64_t>()))
               : std::nullopt;
  if (value.is_number_integer())
    return value.get<int64_t>();
  if (value.is_number_float()) {
    double d = value.get<double>(), whole;
    if (std::isfinite(d) && std::modf(d, &whole) == 0.0 && d >= -0x1p63 &&
        d < 0x1p63)
      return int64_t(d);
  }
  return std::nullopt;
}
} // namespace

const json *JsonConfigKeys::get(const std::string &key) const {
  if (!config.is_object())
    return nullptr;
  auto it = config.find(key);
  return it == config.end() ? nullptr : &*it;
}

const json *JsonConfigKeys::getNested(const std::string &parent,
                                      const std::string &key) const {
  const json *inner = get(parent);
  if (!inner || !inner->is_object())
    return nullptr;
  auto it = inner->find(key);
  return it == inner->end() ? nullptr : &*it;
}

void JsonConfigKeys::fail(const std::string &message) const {
  if (firstError.empty())
    firstError = message;
}

bool JsonConfigKeys::find(const Names &names, const json *&value,
                          std::string &key) const {
  value = nullptr;
  key = names.empty() ? "" : names.front();
  for (const std::string &name : names) {
    const json *v = get(name);
    if (!v || v->is_null())
      continue;
    if (value && *value != *v) {
      fail("keys '" + key + "' = " + value->dump() + " and '" + name +
           "' = " + v->dump() + " disagree");
      return false;
    }
    if (!value) {
      value = v;
      key = name;
    }
  }
  return true;
}

bool JsonConfigKeys::optionalSize(const Names &names,
                                  std::optional<int64_t> &out,
                                  std::string *foundKey) const {
  const json *value;
  std::string key;
  if (!find(names, value, key))
    return false;
  if (foundKey)
    *foundKey = key;
  out.reset();
  if (!value)
    return true;
  std::optional<int64_t> size = asInteger(*value);
  if (!size || *size < 1) {
    fail("key '" + key + "' must be a positive integer, got " +
         value->dump());
    return false;
  }
  out = size;
  return true;
}

bool JsonConfigKeys::requireSize(const Names &names, int64_t &out,
                                 std::string *foundKey) const {
  std::optional<int64_t> size;
  if (!optionalSize(names, size, foundKey))
    return false;
  if (!size) {
    std::string message = "missing required key '" + names.front() + "'";
    for (size_t i = 1; i < names.size(); ++i)
      message += " (or '" + names[i] + "')";
    fail(message);
    return false;
  }
  out = *size;
  return true;
}

bool JsonConfigKeys::optionalString(const Names &names,
                                    std::optional<std::string> &out,
                                    std::string *foundKey) const {
  const json *value;
  std::string key;
  bool found = find(names, value, key);
  if (foundKey)
    *foundKey = key;
  if (!found)
    return false;
  out.reset();
  if (!value)
    return true;
  if (!value->is_string()) {
    fail("key '" + key + "' must be a string, got " + value->dump());
    return false;
  }
  out = value->get<std::string>();
  return true;
}

bool JsonConfigKeys::optionalPositive(const std::string &key,
                                      std::optional<double> &out,
                                      const std::string &parent) const {
  out.reset();
  const json *value = parent.empty() ? get(key) : getNested(parent, key);
  if (!value || value->is_null())
    return true;
  std::string name = parent.empty() ? key : parent + "." + key;
  if (!value->is_number() || !(value->get<double>() > 0) ||
      !std::isfinite(value->get<double>())) {
    fail("key '" + name + "' must be a positive number, got " +
         value->dump());
    return false;
  }
  out = value->get<double>();
  return true;
}

bool JsonConfigKeys::optionalBool(const std::string &key,
                                  std::optional<bool> &out) const {
  out.reset();
  const json *value = get(key);
  if (!value || value->is_null())
    return true;
  if (!value->is_boolean()) {
    fail("key '" + key + "' must be true or false, got " + value->dump());
    return false;
  }
  out = value->get<bool>();
  return true;
}

bool JsonConfigKeys::has(const std::string &key) const {
  const json *value = get(key);
  return value && !value->is_null();
}

bool JsonConfigKeys::isNull(const std::string &key) const {
  const json *value = get(key);
  return value && value->is_null();
}

bool JsonConfigKeys::isObject(const std::string &key) const {
  const json *value = get(key);
  return value && value->is_object();
}

std::optional<int64_t> JsonConfigKeys::getInteger(const std::string &key) const {
  const json *value = get(key);
  return value ? asInteger(*value) : std::nullopt;
}

std::optional<double> JsonConfigKeys::getNumber(const std::string &key) const {
  const json *value = get(key);
  if (!value || !value->is_number())
    return std::nullopt;
  return value->get<double>();
}

std::optional<std::vector<int64_t>>
JsonConfigKeys::getIntegers(const std::string &key) const {
  const json *value = get(key);
  if (!value || !value->is_array())
    return std::nullopt;
  std::vector<int64_t> out;
  for (const json &item : *value) {
    std::optional<int64_t> n = asInteger(item);
    if (!n)
      return std::nullopt;
    out.push_back(*n);
  }
  return out;
}

std::optional<std::string>
JsonConfigKeys::getNestedString(const std::string &parent,
                                const std::string &key) const {
  const json *value = getNested(parent, key);
  if (!value || !value->is_string())
    return std::nullopt;
  return value->get<std::string>();
}

std::optional<double>
JsonConfigKeys::getNestedNumber(const std::string &parent,
                                const std::string &key) const {
  const json *value = getNested(parent, key);
  if (!value || !value->is_number())
    return std::nullopt;
  return value->get<double>();
}

std::optional<int64_t>
JsonConfigKeys::getNestedInteger(const std::string &parent,
                                 const std::string &key) const {
  const json *value = getNested(parent, key);
  return value ? asInteger(*value) : std::nullopt;
}

std::optional<std::vector<std::string>>
JsonConfigKeys::getStrings(const std::string &key) const {
  const json *value = get(key);
  if (!value || !value->is_array())
    return std::nullopt;
  std::vector<std::string> out;
  for (const json &item : *value) {
    if (!item.is_string())
      return std::nullopt;
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::string JsonConfigKeys::format(const std::string &key) const {
  const json *value = get(key);
  return value ? value->dump() : "null";
}

void JsonConfigKeys::error(const std::string &key,
                           const std::string &message) {
  (void)key; // the families' messages name it
  fail(message);
}

} // namespace sluice::rt
