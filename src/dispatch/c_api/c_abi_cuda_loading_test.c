/* Issue 42: CUDA is loaded at run time. libgpusched_c links no CUDA library; it dlopens its CUDA
 * plugin (libgpusched_cuda.so.1) from its own directory at first use. Without a usable CUDA,
 * gpusched_cuda_device_count returns 0 and the thread's last error says what is missing, and
 * gpusched_chunks_create_cuda is refused with that reason, while simulated devices still run.
 *
 *   c_abi_cuda_loading_test driver          the plugin is beside the library (no driver here)
 *   c_abi_cuda_loading_test plugin-missing  the library is a copy in a folder without it
 *   c_abi_cuda_loading_test other-build     ... beside a plugin of another build (refused)
 *   c_abi_cuda_loading_test without-cuda    a library configured without CUDA (returns -1)
 *
 * Exits 77 (skipped) in "driver" mode when a GPU is visible: the no-driver path needs none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_abi_expect.h"

enum { kSkipped = 77 };

/* What the reason must name, and the code create_cuda is refused with, per mode. */
static int Expected(const char* mode, const char** text, int* code, int* count) {
  *code = GPUSCHED_E_UNAVAILABLE;
  *count = 0;
  if (strcmp(mode, "driver") == 0) {
    *text = "cudaGetDeviceCount";
  } else if (strcmp(mode, "plugin-missing") == 0) {
    *text = "libgpusched_cuda.so.1 not loaded";
  } else if (strcmp(mode, "other-build") == 0) {
    *text = "install both from one build";
  } else if (strcmp(mode, "without-cuda") == 0) {
    *text = "built without CUDA";
    *code = GPUSCHED_E_FAILED_PRECONDITION;
    *count = -1;
  } else {
    return 1;
  }
  return 0;
}

static int Issue42_CudaLoadedAtRunTime_ReasonWithoutCuda(const char* mode) {
  const char* text = NULL;
  int code = 0, want = 0;
  gpusched_chunks_runtime* rt = NULL;
  char reason[1024];
  EXPECT(Expected(mode, &text, &code, &want) == 0);
  const int count = gpusched_cuda_device_count();
  if (count > 0 && strcmp(mode, "driver") == 0) {
    printf("SKIP: %d CUDA device(s) visible; the no-driver path needs none\n", count);
    return kSkipped;
  }
  snprintf(reason, sizeof reason, "%s", gpusched_last_error());
  printf("%s: gpusched_cuda_device_count() = %d, reason: %s\n", mode, count, reason);
  EXPECT(count == want);
  EXPECT(reason[0] != '\0');
  EXPECT(strstr(reason, text) != NULL);
  /* The reason is remembered: a second call gives the same. */
  EXPECT(gpusched_cuda_device_count() == want);
  EXPECT(strcmp(gpusched_last_error(), reason) == 0);
  EXPECT_ERROR(gpusched_chunks_create_cuda(0, 0, &rt), code, text);
  EXPECT(rt == NULL);
  EXPECT_ERROR(gpusched_chunks_create_cuda(1, 0, &rt), code, text);
  /* Simulated devices need no CUDA. */
  EXPECT(gpusched_chunks_create_sim(2, 64, 0, &rt) == 0);
  EXPECT(gpusched_chunks_destroy(rt) == 0);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s driver|plugin-missing|other-build|without-cuda\n", argv[0]);
    return 2;
  }
  const int rc = Issue42_CudaLoadedAtRunTime_ReasonWithoutCuda(argv[1]);
  if (rc == 0) printf("c_abi_cuda_loading_test %s: ok\n", argv[1]);
  return rc;
}
