/* Shared by the C API tests compiled as C11: CHECK(cond, fmt, ...) reports a failed condition with
 * its file, line, message and zen's last error, and counts it (atomically: the loopback ranks are
 * threads) in `capi_failures`, which each test's main returns as its exit status. */
#ifndef ZEN_TESTS_CAPI_CHECK_H
#define ZEN_TESTS_CAPI_CHECK_H

#include <stdio.h>

#include "zen/zen.h"

static int capi_failures = 0;

#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);        \
      fprintf(stderr, __VA_ARGS__);                               \
      fprintf(stderr, " [%s]\n", zenGetLastError());              \
      __atomic_add_fetch(&capi_failures, 1, __ATOMIC_SEQ_CST);    \
    }                                                             \
  } while (0)

#endif
