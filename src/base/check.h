#pragma once
// GS_CHECK: aborts with a message when an invariant is broken. For programming errors only;
// expected failures return Status.

#include <cstdio>
#include <cstdlib>

#define GS_CHECK(cond)                                                              \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
