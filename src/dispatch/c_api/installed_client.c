/* A client built from the installed tree only (dispatch_install_test): the header from
 * <gpusched/...>, the library and flags from `pkg-config --cflags --libs gpusched`. Also one
 * asynchronous acquire (symbol version GPUSCHED_C_1.3): queued, polled, released. Built with
 * -DGPUSCHED_EXPECT_CUDA_PLUGIN when the build has one: the installed plugin must load. */
#include <gpusched/gpusched_c.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  gpusched_dispatcher_options options;
  gpusched_service_config service = {"infer", 100, 50, 10};
  gpusched_dispatcher* d = NULL;
  gpusched_lease lease;
  gpusched_async_result result;
  uint64_t request = 0;
  size_t n = 0;
  memset(&options, 0, sizeof options);
  options.gpu_count = 2;
  if (gpusched_abi_version() != GPUSCHED_C_ABI_VERSION ||
      gpusched_dispatcher_create(&options, &service, 1, &d) != 0 ||
      gpusched_dispatcher_acquire(d, "infer", &lease) != 0 ||
      gpusched_dispatcher_release(d, &lease, GPUSCHED_SUCCEEDED) != 0 ||
      gpusched_dispatcher_release(d, &lease, GPUSCHED_SUCCEEDED) != GPUSCHED_E_NOT_FOUND ||
      gpusched_dispatcher_acquire_async(d, "infer", 0, 0, &request) != 0 ||
      gpusched_dispatcher_poll_async(d, &result, 1, &n) != 0 || n != 1 ||
      result.request != request || result.status != 0 ||
      gpusched_dispatcher_release(d, &result.lease, GPUSCHED_SUCCEEDED) != 0 ||
      gpusched_dispatcher_destroy(d) != 0) {
    fprintf(stderr, "installed client failed: %s\n", gpusched_last_error());
    return 1;
  }
#ifdef GPUSCHED_EXPECT_CUDA_PLUGIN
  /* Issue 42: the installed library loads the installed CUDA plugin from beside itself; here
   * without a GPU the reason must be the driver's, not a missing plugin. */
  if (gpusched_cuda_device_count() == 0 && strstr(gpusched_last_error(), "not loaded") != NULL) {
    fprintf(stderr, "installed client: the CUDA plugin was not found: %s\n", gpusched_last_error());
    return 1;
  }
  printf("installed CUDA plugin loaded (%s)\n", gpusched_last_error());
#endif
  printf("installed client OK: gpu %d\n", lease.gpu);
  return 0;
}
