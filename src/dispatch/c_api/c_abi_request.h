/* The C tests' gpusched_request of service "infer" with the issue 42 placement inputs
 * (header-only, C11). */
#ifndef GPUSCHED_C_ABI_REQUEST_H_
#define GPUSCHED_C_ABI_REQUEST_H_

#include <string.h>

#include "gpusched_c.h"

static inline gpusched_request Request(int64_t mem_mib, const char* model, int32_t priority) {
  gpusched_request r;
  memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  r.service = "infer";
  r.expected_mem_mib = mem_mib;
  r.model = model;
  r.priority = priority;
  return r;
}

#endif /* GPUSCHED_C_ABI_REQUEST_H_ */
