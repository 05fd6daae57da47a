//===- Status.h - Runtime error reporting -----------------------*- C++ -*-===//
//
// Runtime functions return a Status instead of throwing or aborting: an
// error is a message that can be printed once, or sent to the other ranks,
// naming what failed. Backends and the executor share it.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_STATUS_H
#define SLUICE_RUNTIME_STATUS_H

#include <string>
#include <utility>

namespace sluice::rt {

class [[nodiscard]] Status {
public:
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status status;
    status.failed = true;
    status.text = std::move(message);
    return status;
  }

  bool isOk() const { return !failed; }
  explicit operator bool() const { return !failed; }
  const std::string &message() const { return text; }

private:
  bool failed = false;
  std::string text;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_STATUS_H
