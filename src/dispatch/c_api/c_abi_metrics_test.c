/* Issue 42's metrics through the C ABI: gpusched_dispatcher_metrics_text. 20 requests that each
 * hold their lease 30 ms, one at a time (no queueing), one failed run of 30 ms, and one lease
 * held about 15 ms: the latency histogram counts exactly the 22 requests, and the p50 computed from its buckets lies in the
 * bucket of 30 ms, (20, 50] ms, as it does for the known run times; requests, failures and
 * timeouts (a blocking deadline, an asynchronous one) are counted; a service name with quotes
 * and backslashes is escaped; a buffer too small gets GPUSCHED_E_RESOURCE_EXHAUSTED and the
 * length. With shared marks, two processes (fork) report the same figures: both runs'
 * requests, in both. With --print, prints the text of such a run for `promtool check metrics`
 * (ctest dispatch_metrics_promtool). C11 + POSIX. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "c_abi_expect.h"
#include "c_abi_time.h"
#include "gpusched_c.h"

enum { kRuns = 20, kRunMs = 30, kRequests = kRuns + 2 };

static int32_t Holds(int32_t gpu, void* user) {
  (void)gpu;
  SleepMs(kRunMs);
  return *(const int32_t*)user;
}

static gpusched_dispatcher* Run(void) { /* the run every check reads */
  gpusched_dispatcher_options o;
  gpusched_service_config services[2] = {{"infer", 20, 10, 5}, {"we\"ird\\name", 20, 10, 5}};
  gpusched_dispatcher* d = NULL;
  gpusched_lease held, late;
  gpusched_async_result r;
  uint64_t id = 0;
  size_t n = 0;
  int32_t ok = 0, fails = 1, result = 0;
  memset(&o, 0, sizeof o);
  o.gpu_count = 1;
  o.max_per_gpu = 1;
  if (gpusched_dispatcher_create(&o, services, 2, &d) != 0) return NULL;
  for (int i = 0; i < kRuns; ++i) {
    if (gpusched_dispatcher_run(d, "infer", Holds, &ok, &result) != 0) return NULL;
  }
  if (gpusched_dispatcher_run(d, "infer", Holds, &fails, &result) != GPUSCHED_E_RUN_FAILED) return NULL;
  if (gpusched_dispatcher_try_acquire(d, "infer", &held) != 0) return NULL;
  if (gpusched_dispatcher_acquire_ex(d, "infer", 5, NULL, 0, &late) != GPUSCHED_E_DEADLINE_EXCEEDED) {
    return NULL;
  }
  if (gpusched_dispatcher_acquire_async(d, "infer", 5, 0, &id) != 0) return NULL;
  SleepMs(10);
  if (gpusched_dispatcher_poll_async(d, &r, 1, &n) != 0 || n != 1 ||
      r.status != GPUSCHED_E_DEADLINE_EXCEEDED) {
    return NULL;
  }
  if (gpusched_dispatcher_release(d, &held, GPUSCHED_SUCCEEDED) != 0) return NULL;
  if (gpusched_dispatcher_run(d, "we\"ird\\name", Holds, &ok, &result) != 0) return NULL;
  return d;
}

static char* Text(gpusched_dispatcher* d) {
  size_t len = 0;
  if (gpusched_dispatcher_metrics_text(d, NULL, 0, &len) != GPUSCHED_E_RESOURCE_EXHAUSTED) return NULL;
  char* buf = malloc(len + 1);
  if (buf == NULL || gpusched_dispatcher_metrics_text(d, buf, len + 1, &len) != 0) return NULL;
  return buf;
}

/* The value of the sample line that starts with `prefix` (-1 when absent). */
static double Value(const char* text, const char* prefix) {
  const char* p = text;
  while ((p = strstr(p, prefix)) != NULL) {
    if (p == text || p[-1] == '\n') return atof(p + strlen(prefix));
    p += 1;
  }
  return -1;
}

static const double kBoundsS[] = {0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                                  0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60};

/* The q-quantile of infer's latency on GPU 0, from the text's cumulative buckets, interpolated
 * as Prometheus' histogram_quantile does. *lo_out, *hi_out: its bucket. */
static double Quantile(const char* text, double q, double* lo_out, double* hi_out) {
  const double count = Value(text, "gpusched_dispatch_latency_seconds_count{service=\"infer\",gpu=\"0\"} ");
  double below = 0, lo = 0;
  for (size_t i = 0; i < sizeof kBoundsS / sizeof kBoundsS[0]; ++i) {
    char prefix[160];
    snprintf(prefix, sizeof prefix,
             "gpusched_dispatch_latency_seconds_bucket{service=\"infer\",gpu=\"0\",le=\"%g\"} ",
             kBoundsS[i]);
    const double cumulative = Value(text, prefix);
    if (cumulative >= q * count && cumulative > below) {
      *lo_out = lo;
      *hi_out = kBoundsS[i];
      return lo + (kBoundsS[i] - lo) * (q * count - below) / (cumulative - below);
    }
    below = cumulative;
    lo = kBoundsS[i];
  }
  return -1;
}

static int Issue42_CN113051059B_Claim6_HistogramCountsEveryRequestAndGivesItsP50(void) {
  gpusched_dispatcher* d = Run();
  char small[16];
  size_t len = 0;
  double lo = 0, hi = 0;
  EXPECT(d != NULL);
  char* text = Text(d);
  EXPECT(text != NULL);
  EXPECT(Value(text, "gpusched_dispatch_latency_seconds_count{service=\"infer\",gpu=\"0\"} ") == kRequests);
  EXPECT(Value(text, "gpusched_dispatch_latency_seconds_bucket{service=\"infer\",gpu=\"0\",le=\"+Inf\"} ") == kRequests);
  EXPECT(Value(text, "gpusched_dispatch_queue_wait_seconds_count{service=\"infer\",gpu=\"0\"} ") == kRequests);
  EXPECT(Value(text, "gpusched_dispatch_requests_total{service=\"infer\"} ") == kRequests);
  EXPECT(Value(text, "gpusched_dispatch_failures_total{service=\"infer\"} ") == 1);
  EXPECT(Value(text, "gpusched_dispatch_timeouts_total{service=\"infer\"} ") == 2);
  EXPECT(Value(text, "gpusched_dispatch_requests_total{service=\"we\\\"ird\\\\name\"} ") == 1);
  const double p50 = Quantile(text, 0.5, &lo, &hi);
  EXPECT(lo == 0.02 && hi == 0.05); /* the bucket of 30 ms, where every run time lies */
  EXPECT(p50 > 0.02 && p50 <= 0.05);
  const double sum = Value(text, "gpusched_dispatch_latency_seconds_sum{service=\"infer\",gpu=\"0\"} ");
  EXPECT(sum >= (kRuns + 1) * kRunMs / 1e3 && sum < kRequests * 2 * kRunMs / 1e3);
  EXPECT(strstr(text, "# HELP gpusched_dispatch_latency_seconds ") != NULL);
  EXPECT(strstr(text, "# TYPE gpusched_dispatch_latency_seconds histogram\n") != NULL);
  EXPECT_ERROR(gpusched_dispatcher_metrics_text(d, small, sizeof small, &len),
               GPUSCHED_E_RESOURCE_EXHAUSTED, "cap: 16 bytes is too small");
  EXPECT(len == strlen(text));
  EXPECT_ERROR(gpusched_dispatcher_metrics_text(d, small, sizeof small, NULL),
               GPUSCHED_E_INVALID_ARGUMENT, "len_out");
  EXPECT_ERROR(gpusched_dispatcher_metrics_text(d, NULL, 8, &len), GPUSCHED_E_INVALID_ARGUMENT, "buf");
  EXPECT_ERROR(gpusched_dispatcher_metrics_text(NULL, small, 8, &len), GPUSCHED_E_INVALID_ARGUMENT,
               "dispatcher");
  printf("  %d requests of %d ms: count %d, p50 %.1f ms in bucket (%g, %g] ms, sum %.3f s\n",
         kRequests, kRunMs, kRequests, p50 * 1e3, lo * 1e3, hi * 1e3, sum);
  free(text);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

static gpusched_dispatcher* OpenShared(const char* segment) {
  gpusched_dispatcher_options o;
  gpusched_service_config service = {"infer", 20, 10, 5};
  gpusched_dispatcher* d = NULL;
  memset(&o, 0, sizeof o);
  o.gpu_count = 2;
  if (gpusched_dispatcher_create_ex(NULL, segment, &o, &service, 1, &d) != 0) return NULL;
  return d;
}

static int RunsOf(gpusched_dispatcher* d, int runs) {
  int32_t ok = 0, result = 0;
  for (int i = 0; i < runs; ++i) {
    if (gpusched_dispatcher_run(d, "infer", Holds, &ok, &result) != 0) return 1;
  }
  return 0;
}

static int Issue42_SharedMarksGiveTheSameFiguresInEveryProcess(void) {
  char segment[64];
  int status = 0;
  snprintf(segment, sizeof segment, "/gpusched-metrics-test-%d", (int)getpid());
  (void)gpusched_shared_marks_unlink(segment);
  gpusched_dispatcher* d = OpenShared(segment);
  EXPECT(d != NULL);
  fflush(stdout); /* the child must not print this process's buffered lines again */
  const pid_t child = fork();
  EXPECT(child >= 0);
  if (child == 0) { /* another process on the same segment: 5 requests, then gone */
    gpusched_dispatcher* c = OpenShared(segment);
    _exit(c == NULL || RunsOf(c, 5) != 0 || gpusched_dispatcher_destroy(c) != 0 ? 1 : 0);
  }
  EXPECT(RunsOf(d, 3) == 0);
  EXPECT(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char* text = Text(d);
  EXPECT(text != NULL);
  EXPECT(Value(text, "gpusched_dispatch_requests_total{service=\"infer\"} ") == 8);
  const double count = Value(text, "gpusched_dispatch_latency_seconds_count{service=\"infer\",gpu=\"0\"} ") +
                       Value(text, "gpusched_dispatch_latency_seconds_count{service=\"infer\",gpu=\"1\"} ");
  EXPECT(count == 8); /* 3 here + 5 in the child, whichever GPU each ran on */
  free(text);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  EXPECT(gpusched_shared_marks_unlink(segment) == 0);
  printf("  shared marks: 3 requests here + 5 in another process = 8 in this one's text\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--print") == 0) {
    gpusched_dispatcher* d = Run();
    char* text = d != NULL ? Text(d) : NULL;
    if (text == NULL) {
      fprintf(stderr, "metrics run failed: %s\n", gpusched_last_error());
      return 1;
    }
    fputs(text, stdout);
    free(text);
    return gpusched_dispatcher_destroy(d) == 0 ? 0 : 1;
  }
  if (Issue42_CN113051059B_Claim6_HistogramCountsEveryRequestAndGivesItsP50()) return 1;
  if (Issue42_SharedMarksGiveTheSameFiguresInEveryProcess()) return 1;
  printf("c_abi_metrics_test: ok\n");
  return 0;
}
