/* c_abi_expect.h: the checks of the C ABI tests (C11): a failed EXPECT prints where, what and
 * the thread's last gpusched error, and returns 1 from the test function. Tests only; not
 * installed. */
#ifndef GPUSCHED_C_ABI_EXPECT_H_
#define GPUSCHED_C_ABI_EXPECT_H_

#include <stdio.h>
#include <string.h>

#include "gpusched_c.h"

#define EXPECT(cond)                                                                      \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "%s:%d: failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              gpusched_last_error());                                                     \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

/* `call` returns `code` and the last error contains `text`. */
#define EXPECT_ERROR(call, code, text)                     \
  do {                                                     \
    EXPECT((call) == (code));                              \
    EXPECT(strstr(gpusched_last_error(), (text)) != NULL); \
  } while (0)

#endif /* GPUSCHED_C_ABI_EXPECT_H_ */
