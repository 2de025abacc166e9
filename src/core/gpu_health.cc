#include "core/gpu_health.h"

#include <charconv>

namespace gpusched::core {
namespace {

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

// A whole-field decimal in [lo, hi], or -1.
int64_t Number(std::string_view text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) return -1;
  return v;
}

std::string Quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out + (text.size() > 64 ? "...\"" : "\"");
}

}  // namespace

StatusOr<std::vector<GpuFault>> ParseGpuFaults(std::string_view text, int gpus) {
  std::vector<GpuFault> faults;
  int line_no = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    const std::vector<std::string_view> f = Fields(line);
    if (f.empty()) continue;
    const std::string where = "fault-file line " + std::to_string(line_no) + ": ";
    const int64_t gpu = Number(f[0], 0, gpus - 1);
    if (gpu < 0) {
      return InvalidArgument(where + "gpu " + Quoted(f[0]) + " is not a GPU index of this node (0.." +
                             std::to_string(gpus - 1) + ")");
    }
    GpuFault fault;
    fault.gpu = static_cast<int>(gpu);
    const std::string_view kind = f.size() > 1 ? f[1] : std::string_view();
    if (kind == "xid" && f.size() == 3) {
      const int64_t code = Number(f[2], 1, 65535);
      if (code < 0) return InvalidArgument(where + "xid code " + Quoted(f[2]) + " is not 1..65535");
      fault.error = "Xid " + std::to_string(code);
    } else if (kind == "ecc" && f.size() <= 3) {
      const int64_t count = f.size() == 3 ? Number(f[2], 1, 1'000'000'000) : 1;
      if (count < 0) return InvalidArgument(where + "ecc count " + Quoted(f[2]) + " is not >= 1");
      fault.error = "ECC uncorrectable errors: " + std::to_string(count);
    } else if (kind == "lost" && f.size() == 2) {
      fault.error = "GPU lost";
    } else {
      return InvalidArgument(where + "kind " + Quoted(kind) + " with " +
                             std::to_string(f.size() - 1) +
                             " fields: use \"GPU xid CODE\", \"GPU ecc [COUNT]\" or \"GPU lost\"");
    }
    faults.push_back(std::move(fault));
  }
  return faults;
}

GpuHealthTracker::GpuHealthTracker(int gpus, DurationMs period_ms)
    : period_ms_(period_ms), gpus_(static_cast<size_t>(std::max(gpus, 0))) {}

void GpuHealthTracker::Fault(const GpuFault& fault, TimeMs now) {
  if (fault.gpu < 0 || static_cast<size_t>(fault.gpu) >= gpus_.size()) return;
  Gpu& g = gpus_[static_cast<size_t>(fault.gpu)];
  g.healthy = false;
  g.bad_since = now;
  g.last_error = fault.error;
}

void GpuHealthTracker::Checked(int gpu, bool passed, TimeMs now) {
  if (gpu < 0 || static_cast<size_t>(gpu) >= gpus_.size() || passed) return;
  Gpu& g = gpus_[static_cast<size_t>(gpu)];
  if (g.healthy) {
    g.healthy = false;
    g.last_error = "health check failed";
  }
  g.bad_since = now;
}

std::vector<GpuHealthView> GpuHealthTracker::Snapshot(TimeMs now) {
  std::vector<GpuHealthView> out;
  out.reserve(gpus_.size());
  for (Gpu& g : gpus_) {
    if (!g.healthy && now - g.bad_since >= period_ms_) g.healthy = true;
    out.push_back({g.healthy, g.last_error});
  }
  return out;
}

}  // namespace gpusched::core
