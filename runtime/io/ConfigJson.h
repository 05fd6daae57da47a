//===- ConfigJson.h - A config.json's keys for the families ---*- C++ -*-===//
//
// The families read a Hugging Face config.json through ConfigKeys
// (sluice/Families/Family.h); sluice-compile's importer gives them one over
// LLVM's JSON with MLIR diagnostics. This one is over nlohmann::json, for
// the runtime, which reads the config.json of a directory --load-hf loads:
// the same rules (positive sizes, aliases that agree, typed values), the
// first error kept as a message.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_IO_CONFIGJSON_H
#define SLUICE_RUNTIME_IO_CONFIGJSON_H

#include "sluice/Families/Family.h"
#include <nlohmann/json.hpp>

#include <string>

namespace sluice::rt {

class JsonConfigKeys final : public families::ConfigKeys {
public:
  explicit JsonConfigKeys(const nlohmann::json &config) : config(config) {}

  bool optionalSize(const Names &names, std::optional<int64_t> &out,
                    std::string *foundKey) const override;
  bool requireSize(const Names &names, int64_t &out,
                   std::string *foundKey) const override;
  bool optionalString(const Names &names, std::optional<std::string> &out,
                      std::string *foundKey) const override;
  bool optionalPositive(const std::string &key, std::optional<double> &out,
                        const std::string &parent) const override;
  bool optionalBool(const std::string &key,
                    std::optional<bool> &out) const override;
  bool has(const std::string &key) const override;
  bool isNull(const std::string &key) const override;
  bool isObject(const std::string &key) const override;
  std::optional<int64_t> getInteger(const std::string &key) const override;
  std::optional<double> getNumber(const std::string &key) const override;
  std::optional<std::vector<int64_t>>
  getIntegers(const std::string &key) const override;
  std::optional<std::string>
  getNestedString(const std::string &parent,
                  const std::string &key) const override;
  std::optional<double> getNestedNumber(const std::string &parent,
                                        const std::string &key) const override;
  std::optional<int64_t>
  getNestedInteger(const std::string &parent,
                   const std::string &key) const override;
  std::optional<std::vector<std::string>>
  getStrings(const std::string &key) const override;
  std::string format(const std::string &key) const override;
  void error(const std::string &key, const std::string &message) override;
  void remark(const std::string &, const std::string &) override {}
  void unmodelled(const std::string &, const std::string &) override {}

  /// The first error reported, or "".
  const std::string &getError() const { return firstError; }

private:
  /// `key`'s value, or null when absent.
  const nlohmann::json *get(const std::string &key) const;
  /// `parent`.`key`'s value, or null when either is absent or `parent` is
  /// not an object.
  const nlohmann::json *getNested(const std::string &parent,
                                  const std::string &key) const;
  /// The first of `names` present and not null (aliases must agree);
  /// false after an error.
  bool find(const Names &names, const nlohmann::json *&value,
            std::string &key) const;
  void fail(const std::string &message) const;

  const nlohmann::json &config;
  mutable std::string firstError;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_IO_CONFIGJSON_H
