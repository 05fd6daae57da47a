//===- InputFile.h - Opening a file the user named --------------*- C++ -*-===//
//
// A path a user gives -- a plan, a data file, a checkpoint's parts -- may
// name a directory, which std::ifstream opens without complaint and then
// fails or throws on the first read. Every reader opens through here, so
// each says what is wrong with the path instead.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_INPUTFILE_H
#define SLUICE_RUNTIME_INPUTFILE_H

#include "Status.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace sluice::rt {

/// Opens `path` for binary reading into `in`; otherwise an error that
/// starts "cannot open WHAT 'PATH'" and says why (a directory, or the
/// system's reason). `what` may be empty.
inline Status openInputFile(const std::string &path, const std::string &what,
                            std::ifstream &in) {
  std::string named = (what.empty() ? "" : what + " ") + "'" + path + "'";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Status::error("cannot open " + named + ": it is a directory");
  in.open(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open " + named + ": " + std::strerror(errno));
  return Status::ok();
}

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_INPUTFILE_H
