#pragma once
// The metrics of a dispatcher as Prometheus text exposition format 0.0.4 (issue 42): what
// gpusched_dispatcher_metrics_text returns, for a scrape endpoint or a file collector. A pure
// function of a snapshot.
//
// Families (all with HELP and TYPE; times in seconds, as Prometheus names them):
//   gpusched_dispatch_latency_seconds{service,gpu}     histogram, arrival -> release
//   gpusched_dispatch_queue_wait_seconds{service,gpu}  histogram, arrival -> GPU granted
//   gpusched_dispatch_requests_total{service}          counter, leases released
//   gpusched_dispatch_failures_total{service}          counter, released as failed
//   gpusched_dispatch_timeouts_total{service}          counter, deadline or acquire_timeout
//   gpusched_dispatch_give_ups_total{service}          counter, rounds with no GPU free
//   gpusched_dispatch_cost_seconds{service}            gauge, the learned cost (claim 6)
//   gpusched_dispatch_gpu_running{gpu}                 gauge, leases running now
//   gpusched_dispatch_gpu_busy_seconds_total{gpu}      counter, time with a lease running
// The histograms' buckets are kHistogramBoundsMs (dispatch_metrics.h) in seconds, so
// histogram_quantile(0.99, sum by (service, le) (rate(..._bucket[5m]))) gives a p99 per
// service. Label values are escaped (backslash, double quote, newline).

#include <string>
#include <string_view>

#include "dispatch/dispatch_metrics.h"

namespace gpusched::dispatch {

std::string PrometheusText(const DispatchMetrics& metrics);

// `value` as a label value inside double quotes: \ -> \\, " -> \", newline -> \n.
std::string EscapeLabelValue(std::string_view value);

}  // namespace gpusched::dispatch
