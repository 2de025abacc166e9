#include "server/rest_params.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <set>
#include <vector>

#include "base/units.h"
#include "core/node_rules.h"
#include "spec/profile_flag.h"

namespace gpusched::server::rest {
namespace {

using Json = nlohmann::json;

// `value` quoted for an error message, cut to a readable length.
std::string Quote(std::string_view value) {
  constexpr size_t kMax = 64;
  std::string out = "\"";
  out += value.size() > kMax ? std::string(value.substr(0, kMax)) + "..." : std::string(value);
  return out + "\"";
}

std::optional<int64_t> ParseInt(std::string_view text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || text.empty()) return std::nullopt;
  return v;
}

const char* TypeName(const Json& j) { return j.type_name(); }

Status WrongType(const std::string& field, const Json& j, const std::string& want) {
  // The value as JSON (a string keeps its quotes), cut to a readable length.
  std::string value = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (value.size() > 64) value = value.substr(0, 64) + "...";
  return InvalidArgument(field + ": must be " + want + ", got " + TypeName(j) + " " + value);
}

StatusOr<int64_t> JsonCount(const Json& j, const std::string& field) {
  if (!j.is_number_integer() || j.get<int64_t>() < 0) {
    return WrongType(field, j, "a whole number >= 0");
  }
  return j.get<int64_t>();
}

// A size (MiB) or duration (ms): a string with a unit, or a bare number of MiB or seconds.
StatusOr<int64_t> JsonQuantity(const Json& j, const std::string& field, bool size) {
  if (j.is_string()) {
    const std::string text = j.get<std::string>();
    return size ? ParseSizeMiB(text, field) : ParseDurationMs(text, field);
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    const int64_t v = j.get<int64_t>();
    if (size) return v;  // MiB
    if (v > INT64_MAX / 1000) return WrongType(field, j, "a duration");
    return v * 1000;     // seconds
  }
  return WrongType(field, j, size ? "a size (\"6GiB\" or a number of MiB)"
                                  : "a duration (\"1h\" or a number of seconds)");
}

Status ApplyField(const std::string& key, const Json& v, SubmitBody& out) {
  core::TaskSpec& s = out.spec;
  if (key == "command" || key == "env") {
    if (key == "command" ? !v.is_array() : !v.is_object()) {
      return WrongType(key, v, key == "command" ? "an array of strings" : "an object of strings");
    }
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string where = key == "command" ? key + "[" + std::to_string(s.command.size()) +
                                                       "]"
                                                 : key + "." + it.key();
      if (!it->is_string()) return WrongType(where, *it, "a string");
      if (key == "command") s.command.push_back(it->get<std::string>());
      else s.env[it.key()] = it->get<std::string>();
    }
    return Status::Ok();
  }
  if (key == "node_selector") {  // {"zone": "a"}: labels a node must have
    if (!v.is_object()) return WrongType(key, v, "an object of label values");
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it->is_string()) return WrongType(key + "." + it.key(), *it, "a string");
      const std::string value = it->get<std::string>();
      GS_RETURN_IF_ERROR(core::ValidateLabel(it.key(), value, key, it.key() + "=" + value));
      s.node_selector[it.key()] = value;
    }
    return Status::Ok();
  }
  if (key == "tolerations") {  // ["dedicated=infer:NoSchedule"], as `submit --toleration`
    if (!v.is_array()) return WrongType(key, v, "an array of strings");
    for (const Json& t : v) {
      const std::string where = key + "[" + std::to_string(s.tolerations.size()) + "]";
      if (!t.is_string()) return WrongType(where, t, "a string");
      GS_ASSIGN_OR_RETURN(core::Toleration parsed,
                          core::ParseToleration(t.get<std::string>(), where));
      s.tolerations.push_back(std::move(parsed));
    }
    return Status::Ok();
  }
  if (key == "array") {  // "0-999", as `submit --array`
    if (!v.is_string()) return WrongType(key, v, "a string such as \"0-999\"");
    GS_ASSIGN_OR_RETURN(out.array, ParseIndexRange(v.get<std::string>(), core::kMaxArrayTasks, key));
    return Status::Ok();
  }
  if (key == "profile") {  // "resnet50,batch=32", as `submit --profile`
    if (!v.is_string()) return WrongType(key, v, "a string");
    GS_ASSIGN_OR_RETURN(s.profile, spec::ParseProfileFlag(v.get<std::string>(), key));
    return Status::Ok();
  }
  if (key == "name" || key == "idempotency_key" || key == "priority") {
    if (!v.is_string()) return WrongType(key, v, "a string");
    (key == "name" ? s.name : key == "priority" ? s.priority_class : out.idempotency_key) =
        v.get<std::string>();
    return Status::Ok();
  }
  if (key == "gpus") {
    GS_ASSIGN_OR_RETURN(s.gpus, JsonCount(v, key));
  } else if (key == "retries") {
    GS_ASSIGN_OR_RETURN(int64_t n, JsonCount(v, key));
    s.max_retries = n;
  } else if (key == "gpu_mem") {
    GS_ASSIGN_OR_RETURN(s.gpu_mem_mib, JsonQuantity(v, key, true));
    if (s.gpu_mem_mib == 0) {  // the spec's 0 means "no share": a whole GPU or none
      return InvalidArgument("gpu_mem: " + v.dump() + " is no memory; a GPU share needs more "
                             "than 0 (leave gpu_mem out to ask for whole GPUs)");
    }
  } else if (key == "mem") {
    GS_ASSIGN_OR_RETURN(s.resources.mem_mib, JsonQuantity(v, key, true));
  } else if (key == "duration") {
    GS_ASSIGN_OR_RETURN(int64_t ms, JsonQuantity(v, key, false));
    s.duration_ms = ms;
  } else if (key == "cpu") {  // cores (4, 0.5) or a string as the CLI takes ("4", "500m")
    if (v.is_string()) {
      GS_ASSIGN_OR_RETURN(s.resources.cpu_milli, ParseCpuMilli(v.get<std::string>(), key));
    } else if (v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1e6) {
      s.resources.cpu_milli = static_cast<int64_t>(std::llround(v.get<double>() * 1000));
    } else {
      return WrongType(key, v, "a number of cores in 0..1000000 or a string such as \"500m\"");
    }
  } else {
    return InvalidArgument(Quote(key) + ": unknown field (known: command, name, gpus, gpu_mem, "
                           "cpu, mem, duration, retries, env, idempotency_key, node_selector, "
                           "tolerations, profile, array, priority)");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Query> CheckQuery(const std::multimap<std::string, std::string>& params,
                           const std::set<std::string>& allowed) {
  Query q;
  for (const auto& [name, value] : params) {
    if (allowed.count(name) == 0) {
      std::string known;
      for (const std::string& a : allowed) known += (known.empty() ? "" : ", ") + a;
      return InvalidArgument(Quote(name) + ": unknown query parameter (known: " +
                             (known.empty() ? "none" : known) + ")");
    }
    if (!q.emplace(name, value).second) {
      return InvalidArgument(name + ": given more than once");
    }
  }
  return q;
}

StatusOr<int64_t> IntParam(const Query& q, const std::string& name, int64_t min, int64_t max,
                           int64_t fallback) {
  auto it = q.find(name);
  if (it == q.end()) return fallback;
  std::optional<int64_t> v = ParseInt(it->second);
  if (!v || *v < min || *v > max) {
    return InvalidArgument(name + ": " + Quote(it->second) + " is not a whole number in " +
                           std::to_string(min) + ".." + std::to_string(max));
  }
  return *v;
}

StatusOr<std::optional<core::TaskState>> StateParam(const Query& q, const std::string& name) {
  auto it = q.find(name);
  if (it == q.end()) return std::optional<core::TaskState>();
  for (core::TaskState s : {core::TaskState::kPending, core::TaskState::kPreempted,
                            core::TaskState::kAssigned, core::TaskState::kRunning,
                            core::TaskState::kSucceeded, core::TaskState::kFailed,
                            core::TaskState::kCancelled}) {
    if (it->second == core::TaskStateName(s)) return std::optional<core::TaskState>(s);
  }
  return InvalidArgument(name + ": " + Quote(it->second) +
                         " is not a task state (pending, preempted, assigned, running, "
                         "succeeded, failed, cancelled)");
}

StatusOr<int64_t> DurationParam(const Query& q, const std::string& name, int64_t fallback) {
  auto it = q.find(name);
  if (it == q.end()) return fallback;
  GS_ASSIGN_OR_RETURN(int64_t ms, ParseDurationMs(it->second, name));
  if (ms <= 0) return InvalidArgument(name + ": " + Quote(it->second) + " must be > 0");
  return ms;
}

StatusOr<int64_t> TimeParam(const Query& q, const std::string& name, int64_t now_ms,
                            int64_t fallback) {
  constexpr int64_t kFirstUnixMs = 1'000'000'000'000;  // 2001: below it, a bare number is "ago"
  auto it = q.find(name);
  if (it == q.end()) return fallback;
  if (std::optional<int64_t> v = ParseInt(it->second); v && *v >= kFirstUnixMs) return *v;
  StatusOr<int64_t> ago = ParseDurationMs(it->second, name);
  if (!ago.ok()) {
    return InvalidArgument(name + ": " + Quote(it->second) +
                           " is neither a duration ago (\"2h\") nor a Unix time in ms");
  }
  return now_ms - *ago;
}

StatusOr<uint64_t> TaskIdParam(const std::string& text) {
  std::optional<int64_t> v = ParseInt(text);
  if (!v || *v < 1) return InvalidArgument("id: " + Quote(text) + " is not a task id (>= 1)");
  return static_cast<uint64_t>(*v);
}

StatusOr<SubmitBody> ParseSubmitBody(std::string_view body) {
  // A key twice in one object: nlohmann keeps the last one unsaid; refused, naming it.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const Json::parser_callback_t keys = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == Json::parse_event_t::object_end && !open_objects.empty()) {
      open_objects.pop_back();
    } else if (event == Json::parse_event_t::key && !open_objects.empty() &&
               !open_objects.back().insert(parsed.get<std::string>()).second &&
               duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  const Json j = Json::parse(body, keys, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("body: not valid JSON");
  if (!duplicate.empty()) return InvalidArgument(Quote(duplicate) + ": given twice");
  if (!j.is_object()) return WrongType("body", j, "a JSON object");
  SubmitBody out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    GS_RETURN_IF_ERROR(ApplyField(it.key(), *it, out));
  }
  if (out.spec.command.empty()) {
    return InvalidArgument("command: missing; give the task's command as an array of strings, "
                           "e.g. [\"python3\", \"train.py\"]");
  }
  return out;
}

}  // namespace gpusched::server::rest
