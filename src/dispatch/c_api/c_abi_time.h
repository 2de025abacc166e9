/* c_abi_time.h: the monotonic clock and sleeps of the C ABI tests (C11 + POSIX: define
 * _POSIX_C_SOURCE 200809L before any include). Tests only; not installed. */
#ifndef GPUSCHED_C_ABI_TIME_H_
#define GPUSCHED_C_ABI_TIME_H_

#include <time.h>

/* Milliseconds on CLOCK_MONOTONIC. */
static inline double NowMs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline void SleepMs(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

#endif /* GPUSCHED_C_ABI_TIME_H_ */
