// Issue 42's metrics: the fixed log-spaced histogram, its quantiles, and the Prometheus text
// (HELP and TYPE for every family, cumulative buckets, escaped label values).
#include "dispatch/prometheus_text.h"

#include <gtest/gtest.h>

namespace gpusched::dispatch {
namespace {

TEST(Issue42DispatchHistogram, CountsEachValueInTheBucketOfItsUpperBound) {
  Histogram h;
  h.Add(0.05);   // <= 0.1
  h.Add(0.1);    // <= 0.1: bounds are inclusive
  h.Add(30);     // (20, 50]
  h.Add(1e6);    // above 60 s: the last, unbounded bucket
  EXPECT_EQ(h.count, 4u);
  EXPECT_EQ(h.counts[0], 2u);
  EXPECT_EQ(h.counts[8], 1u);  // kHistogramBoundsMs[8] == 50
  EXPECT_EQ(h.counts.back(), 1u);
  EXPECT_DOUBLE_EQ(h.sum_ms, 0.05 + 0.1 + 30 + 1e6);
}

TEST(Issue42DispatchHistogram, QuantileIsWithinTheBucketOfTheTrueValue) {
  Histogram h;
  for (int i = 0; i < 100; ++i) h.Add(30);
  EXPECT_GT(h.Quantile(0.5), 20);
  EXPECT_LE(h.Quantile(0.5), 50);
  h.Add(700);  // one slow request in (500, 1000]
  EXPECT_LE(h.Quantile(0.99), 50);
  EXPECT_GT(h.Quantile(1.0), 500);
  EXPECT_EQ(Histogram{}.Quantile(0.5), 0);
}

TEST(Issue42DispatchPrometheusText, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("ocr"), "ocr");
}

TEST(Issue42DispatchPrometheusText, EveryFamilyHasHelpAndTypeAndCumulativeBuckets) {
  MetricsRecorder r({"ocr", "a\"b"}, 2, 0);
  r.OnGrant(0, 1, false, 0);
  r.OnComplete(0, 1, 1.0, 29.0, 30'000'000);  // latency 30 ms, queue 1 ms
  DispatchMetrics m = r.Snapshot(40'000'000, {20, 20});
  m.services[0].timeouts = 3;
  const std::string text = PrometheusText(m);
  for (const char* family : {"latency_seconds histogram", "queue_wait_seconds histogram",
                             "requests_total counter", "failures_total counter",
                             "timeouts_total counter", "give_ups_total counter",
                             "cost_seconds gauge", "gpu_running gauge",
                             "gpu_busy_seconds_total counter"}) {
    EXPECT_NE(text.find(std::string("# TYPE gpusched_dispatch_") + family), std::string::npos)
        << family;
  }
  EXPECT_NE(text.find("gpusched_dispatch_latency_seconds_bucket{service=\"ocr\",gpu=\"1\","
                      "le=\"0.02\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("gpusched_dispatch_latency_seconds_bucket{service=\"ocr\",gpu=\"1\","
                      "le=\"0.05\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("gpusched_dispatch_latency_seconds_bucket{service=\"ocr\",gpu=\"1\","
                      "le=\"60\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("gpusched_dispatch_latency_seconds_count{service=\"ocr\",gpu=\"1\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpusched_dispatch_latency_seconds_sum{service=\"ocr\",gpu=\"1\"} 0.03\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpusched_dispatch_timeouts_total{service=\"ocr\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("{service=\"a\\\"b\"}"), std::string::npos);  // escaped
  EXPECT_NE(text.find("gpusched_dispatch_cost_seconds{service=\"ocr\"} 0.02\n"), std::string::npos);
}

}  // namespace
}  // namespace gpusched::dispatch
