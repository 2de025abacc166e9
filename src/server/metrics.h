#pragma once
// Prometheus text-format helpers for /metrics: a fixed-bucket histogram and a writer that
// emits HELP/TYPE lines once per metric family.
//
// Thread-safety: Histogram::Observe and Render are guarded by an internal mutex.

#include <mutex>
#include <string>
#include <vector>

namespace gpusched::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)),
                                                         counts_(bounds_.size() + 1, 0) {}
  void Observe(double value);
  // Appends the _bucket, _sum and _count lines of `name`.
  void Render(const std::string& name, std::string& out) const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Appends "# HELP name help\n# TYPE name type\n".
void MetricHeader(const std::string& name, const std::string& type, const std::string& help,
                  std::string& out);
// Appends `name{labels} value\n`; `labels` is already formatted (`node="n1"`) or empty.
void MetricLine(const std::string& name, const std::string& labels, double value,
                std::string& out);
// Escapes a label value (backslash, quote, newline).
std::string LabelValue(const std::string& v);

}  // namespace gpusched::server
