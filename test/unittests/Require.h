//===- Require.h - What a test cannot go on without -------------*- C++ -*-===//
//
// gtest's ASSERT_* return from the enclosing function, so helpers that
// return a value can only EXPECT, and then dereferencing a failed parse,
// FailureOr or optional is undefined behaviour. require() fails the test
// with a message and stops the binary instead.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_TEST_UNITTESTS_REQUIRE_H
#define SLUICE_TEST_UNITTESTS_REQUIRE_H

#include "llvm/Support/LogicalResult.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace sluice::test {

/// Fails the test and exits, naming `what`.
[[noreturn]] inline void cannotGoOn(const char *what) {
  ADD_FAILURE() << "cannot go on: " << what;
  std::fprintf(stderr, "cannot go on: %s\n", what);
  std::exit(1);
}

/// `value` (anything testable as a bool: OwningOpRef, std::optional), or
/// a failed test and an exit naming `what`.
template <class T> T &&require(T &&value, const char *what) {
  if (!value)
    cannotGoOn(what);
  return std::forward<T>(value);
}

/// The same for a FailureOr.
template <class T>
llvm::FailureOr<T> require(llvm::FailureOr<T> &&value, const char *what) {
  if (llvm::failed(value))
    cannotGoOn(what);
  return std::move(value);
}

} // namespace sluice::test

#endif // SLUICE_TEST_UNITTESTS_REQUIRE_H
