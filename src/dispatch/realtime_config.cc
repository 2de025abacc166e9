#include "dispatch/realtime_config.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

namespace gpusched::dispatch {
namespace {

std::string Field(const ServiceConfig& s, const char* field) {
  return "services[" + s.name + "]." + field;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// A time in ms as a person writes it: 100, 0.25.
std::string Ms(double ms) {
  std::ostringstream out;
  out << ms;
  return out.str();
}

}  // namespace

Status ValidateCommonFields(int gpu_count, int max_gpus, size_t services, CostLearning learning,
                            double ema_alpha, int max_per_gpu) {
  if (gpu_count < 1 || gpu_count > max_gpus) {
    return InvalidArgument(
        (max_gpus == std::numeric_limits<int>::max()
             ? std::string("gpu_count: must be >= 1")
             : "gpu_count: must be in [1, " + std::to_string(max_gpus) + "]") +
        ", got " + std::to_string(gpu_count));
  }
  if (services == 0) return InvalidArgument("services: at least one is required");
  if (learning == CostLearning::kEma && !(ema_alpha > 0 && ema_alpha <= 1)) {
    return InvalidArgument("ema_alpha: must be in (0, 1], got " + std::to_string(ema_alpha));
  }
  if (max_per_gpu < 0) {
    return InvalidArgument("max_per_gpu: must be >= 0 (0: no cap), got " +
                           std::to_string(max_per_gpu));
  }
  return Status::Ok();
}

Status ValidateAcquireTimeout(DurationMs acquire_timeout) {
  if (acquire_timeout < 0) {
    return InvalidArgument("acquire_timeout: must be >= 0 ms (0: none), got " +
                           std::to_string(acquire_timeout));
  }
  return Status::Ok();
}

Status ValidateConfig(const DispatcherConfig& config) {
  GS_RETURN_IF_ERROR(ValidateCommonFields(config.gpu_count, std::numeric_limits<int>::max(),
                                          config.services.size(), config.learning,
                                          config.ema_alpha, config.max_per_gpu));
  GS_RETURN_IF_ERROR(ValidateAcquireTimeout(config.acquire_timeout));
  std::set<std::string> names;
  for (const ServiceConfig& s : config.services) {
    if (s.name.empty()) return InvalidArgument("services[].name: must not be empty");
    if (!names.insert(s.name).second) {
      return InvalidArgument("services[].name: duplicate \"" + s.name + "\"");
    }
    if (!(s.cost_time > 0) || !std::isfinite(s.cost_time)) {  // also refuses NaN
      return InvalidArgument(Field(s, "cost_time") + ": must be finite and > 0 ms, got " +
                             Ms(s.cost_time));
    }
    if (s.wait_time < 0) {
      return InvalidArgument(Field(s, "wait_time") + ": must be >= 0, got " +
                             std::to_string(s.wait_time));
    }
    // CN113051059B claim 7: the wait budget is shorter than the task's cost.
    if (s.wait_time >= s.cost_time) {
      return InvalidArgument(Field(s, "wait_time") + ": must be < cost_time (" +
                             Ms(s.cost_time) + "), got " +
                             std::to_string(s.wait_time));
    }
    if (s.try_time <= 0) {
      return InvalidArgument(Field(s, "try_time") + ": must be > 0, got " +
                             std::to_string(s.try_time));
    }
  }
  return Status::Ok();
}

StatusOr<std::map<std::string, DurationMs>> ParseCostTable(std::string_view text) {
  std::map<std::string, DurationMs> table;
  int line_no = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    line = Trim(line);
    if (line.empty()) continue;
    const size_t sep = line.find_first_of("= \t");
    const std::string where = "cost table line " + std::to_string(line_no);
    if (sep == std::string_view::npos) {
      return InvalidArgument(where + ": expected `service cost_ms`, got \"" + std::string(line) +
                             "\"");
    }
    const std::string name(Trim(line.substr(0, sep)));
    const std::string_view value = Trim(line.substr(sep + 1));
    DurationMs cost = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), cost);
    if (ec != std::errc() || end != value.data() + value.size() || cost <= 0) {
      return InvalidArgument(where + ": cost of \"" + name + "\" must be a positive integer ms, got \"" +
                             std::string(value) + "\"");
    }
    table[name] = cost;
  }
  return table;
}

Status ApplyCostTable(const std::map<std::string, DurationMs>& table, DispatcherConfig& config) {
  for (const auto& [name, cost] : table) {
    bool found = false;
    for (ServiceConfig& s : config.services) {
      if (s.name == name) {
        s.cost_time = cost;
        found = true;
      }
    }
    if (!found) return NotFound("cost table: no service named \"" + name + "\"");
  }
  return Status::Ok();
}

const char* ScanOrderName(ScanOrder s) {
  return s == ScanOrder::kIndex ? "index" : "earliest-finish";
}

}  // namespace gpusched::dispatch
