#include "dispatch/prometheus_text.h"

#include <cstdio>

namespace gpusched::dispatch {
namespace {

constexpr const char* kPrefix = "gpusched_dispatch_";

// Shortest text that reads back as `v` (up to 17 significant digits).
std::string Number(double v) {
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    double back = 0;
    if (std::sscanf(buf, "%lf", &back) == 1 && back == v) break;
  }
  return buf;
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + kPrefix + name + " " + help + "\n";
  out += std::string("# TYPE ") + kPrefix + name + " " + type + "\n";
}

void Sample(std::string& out, const std::string& name, const std::string& labels, double value) {
  out += kPrefix + name + "{" + labels + "} " + Number(value) + "\n";
}

std::string ServiceLabel(const DispatchMetrics& m, int service) {
  return "service=\"" + EscapeLabelValue(m.services[service].name) + "\"";
}

void HistogramFamily(std::string& out, const DispatchMetrics& m, const char* name,
                     const char* help, Histogram LatencyCell::*which) {
  Header(out, name, "histogram", help);
  const std::string base = name;
  for (const LatencyCell& cell : m.cells) {
    const Histogram& h = cell.*which;
    const std::string labels =
        ServiceLabel(m, cell.service) + ",gpu=\"" + std::to_string(cell.gpu) + "\"";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kHistogramBoundsMs.size(); ++i) {
      cumulative += h.counts[i];
      Sample(out, base + "_bucket", labels + ",le=\"" + Number(kHistogramBoundsMs[i] / 1e3) + "\"",
             static_cast<double>(cumulative));
    }
    Sample(out, base + "_bucket", labels + ",le=\"+Inf\"", static_cast<double>(h.count));
    Sample(out, base + "_sum", labels, h.sum_ms / 1e3);
    Sample(out, base + "_count", labels, static_cast<double>(h.count));
  }
}

void ServiceFamily(std::string& out, const DispatchMetrics& m, const char* name, const char* type,
                   const char* help, double (*value)(const ServiceMetrics&)) {
  Header(out, name, type, help);
  for (size_t s = 0; s < m.services.size(); ++s) {
    Sample(out, name, ServiceLabel(m, static_cast<int>(s)), value(m.services[s]));
  }
}

void GpuFamilies(std::string& out, const DispatchMetrics& m) {
  Header(out, "gpu_running", "gauge", "Leases running on the GPU now.");
  for (const GpuMetrics& g : m.gpus) {
    Sample(out, "gpu_running", "gpu=\"" + std::to_string(g.gpu) + "\"", g.running);
  }
  Header(out, "gpu_busy_seconds_total", "counter",
         "Time the GPU had at least one lease running, since the dispatcher was created.");
  for (const GpuMetrics& g : m.gpus) {
    Sample(out, "gpu_busy_seconds_total", "gpu=\"" + std::to_string(g.gpu) + "\"",
           g.busy_ms / 1e3);
  }
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string PrometheusText(const DispatchMetrics& m) {
  std::string out;
  HistogramFamily(out, m, "latency_seconds", "Request latency, arrival to release, per service and GPU.",
                  &LatencyCell::latency);
  HistogramFamily(out, m, "queue_wait_seconds",
                  "Queue wait, arrival to GPU granted, per service and GPU.",
                  &LatencyCell::queue_wait);
  ServiceFamily(out, m, "requests_total", "counter", "Leases released, failed ones included.",
                [](const ServiceMetrics& s) { return static_cast<double>(s.all_completed); });
  ServiceFamily(out, m, "failures_total", "counter", "Leases released as failed.",
                [](const ServiceMetrics& s) { return static_cast<double>(s.all_failed); });
  ServiceFamily(out, m, "timeouts_total", "counter",
                "Acquires ended by their deadline or by acquire_timeout before a GPU was granted.",
                [](const ServiceMetrics& s) { return static_cast<double>(s.timeouts); });
  ServiceFamily(out, m, "give_ups_total", "counter",
                "Acquire rounds that found no GPU to grant (CN113051059B claim 2).",
                [](const ServiceMetrics& s) { return static_cast<double>(s.give_ups); });
  ServiceFamily(out, m, "cost_seconds", "gauge",
                "The learned expected run time of a request (CN113051059B claim 6).",
                [](const ServiceMetrics& s) { return s.cost_time_ms / 1e3; });
  GpuFamilies(out, m);
  return out;
}

}  // namespace gpusched::dispatch
