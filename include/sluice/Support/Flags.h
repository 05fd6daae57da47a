//===- Flags.h - Command lines read once, mistakes said once ----*- C++ -*-===//
//
// Every tool reads its flags with LLVM's cl (llvm/Support/CommandLine.h).
// Its parser, left to itself, prints each mistake and exits on every rank
// of an mpirun, and reports a mistyped flag twice: once as unknown, then
// its value (now a stray word) as one positional argument too many.
// parseFlags keeps the first report and leaves the printing to the
// caller's rank 0.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SUPPORT_FLAGS_H
#define SLUICE_SUPPORT_FLAGS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace sluice {

/// The parser's report with the lines that only follow from an unknown
/// flag (its value read as a surplus positional argument) left out.
inline std::string keepFirstMistakes(const std::string &report) {
  bool unknown = report.find("Unknown command line argument") !=
                 std::string::npos;
  std::string kept;
  for (size_t at = 0; at < report.size();) {
    size_t end = report.find('\n', at);
    if (end == std::string::npos)
      end = report.size();
    llvm::StringRef line(report.data() + at, end - at);
    bool follows = line.contains("Too many positional arguments") ||
                   line.contains("positional arguments: See:");
    if (!(unknown && follows))
      kept += line.str() + "\n";
    at = end + 1;
  }
  return kept;
}

/// cl::ParseCommandLineOptions, but on a mistake it returns false instead
/// of exiting, after printing the report (trimmed as above) to stderr if
/// `print` -- rank 0 of a job prints, the others stay quiet.
inline bool parseFlags(int argc, const char *const *argv,
                       llvm::StringRef overview, bool print = true) {
  std::string report;
  llvm::raw_string_ostream os(report);
  bool ok = llvm::cl::ParseCommandLineOptions(argc, argv, overview, &os);
  os.flush();
  if (!ok && print)
    llvm::errs() << keepFirstMistakes(report);
  return ok;
}

} // namespace sluice

#endif // SLUICE_SUPPORT_FLAGS_H
