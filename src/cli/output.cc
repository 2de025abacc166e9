#include "cli/output.h"

#include <algorithm>
#include <chrono>
#include <ostream>

#include "base/units.h"
#include "core/stop_signal.h"

namespace gpusched::cli {

std::string JoinInts(const google::protobuf::RepeatedField<int32_t>& v) {
  std::string s;
  for (int i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v.Get(i));
  return s;
}

std::string DescribeRequest(const ::gpusched::v1::TaskSpec& s) {
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (s.gpus() > 0 || s.gpu_mem_mib() > 0) {
    const int64_t n = std::max<int64_t>(1, s.gpus());
    std::string gpus = std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
    gpus += s.gpu_mem_mib() > 0 ? " x " + FormatSizeMiB(s.gpu_mem_mib()) : " (whole)";
    if (s.nodes() > 1) gpus = std::to_string(s.nodes()) + " nodes x " + gpus + " (gang)";
    add(gpus);
  }
  if (!s.priority_class().empty()) add("priority " + s.priority_class());
  if (s.has_preemptible() && !s.preemptible()) add("not preemptible");
  if (s.has_grace_ms()) add(FormatDurationMs(s.grace_ms()) + " grace");
  if (s.has_stop_signal()) add("stop signal " + core::StopSignalName(s.stop_signal()));
  if (s.cpu_milli() > 0) {
    add(s.cpu_milli() % 1000 == 0 ? std::to_string(s.cpu_milli() / 1000) + " CPU"
                                  : std::to_string(s.cpu_milli()) + "m CPU");
  }
  if (s.mem_mib() > 0) add(FormatSizeMiB(s.mem_mib()) + " RAM");
  if (s.has_duration_ms()) add("expected " + FormatDurationMs(s.duration_ms()));
  if (s.has_time_limit_ms()) add(FormatDurationMs(s.time_limit_ms()) + " limit");
  if (s.has_heartbeat_timeout_ms()) {
    add("heartbeat file within " + FormatDurationMs(s.heartbeat_timeout_ms()));
  }
  if (s.has_max_retries()) {
    add(std::to_string(s.max_retries()) + (s.max_retries() == 1 ? " retry" : " retries"));
  }
  return out.empty() ? "no GPU" : out;
}

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

std::string Age(int64_t at_ms, int64_t now_ms) {
  if (at_ms <= 0) return "-";
  return FormatDurationMs(std::max<int64_t>(0, now_ms - at_ms)) + " ago";
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace gpusched::cli
