#include "server/metrics.h"

#include <cstdio>

namespace gpusched::server {
namespace {

// A sample value in the Prometheus text format (%.9g: integers print without a fraction).
std::string PromNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

void Histogram::Observe(double value) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, std::string& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + PromNumber(bounds_[i]) + "\"} " + std::to_string(cumulative) +
           "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + PromNumber(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

void MetricHeader(const std::string& name, const std::string& type, const std::string& help,
                  std::string& out) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void MetricLine(const std::string& name, const std::string& labels, double value,
                std::string& out) {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += " " + PromNumber(value) + "\n";
}

std::string LabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace gpusched::server
