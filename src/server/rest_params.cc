#include "server/rest_params.h"

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <vector>

#include "base/units.h"
#include "spec/spec_yaml.h"

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

// The REST-only fields, kept apart from the job's (spec::JobFileFields).
constexpr const char* kRestOnlyFields[] = {"idempotency_key", "array"};

// JSON nests no deeper than this in a job's fields (a list of tolerations, each an object).
constexpr int kMaxFieldDepth = 4;

// A JSON value as the YAML node a job file would hold there, so that the job file's parser
// reads the body (spec/spec_yaml.h): a string, number or boolean is a scalar of its text.
StatusOr<YAML::Node> ToYaml(const Json& j, const std::string& field, int depth = 0) {
  if (depth > kMaxFieldDepth) return InvalidArgument(field + ": nested too deeply");
  if (j.is_string()) return YAML::Node(j.get<std::string>());
  if (j.is_primitive()) return YAML::Node(j.dump());  // null is left out before this
  YAML::Node out(j.is_object() ? YAML::NodeType::Map : YAML::NodeType::Sequence);
  for (auto it = j.begin(); it != j.end(); ++it) {
    GS_ASSIGN_OR_RETURN(YAML::Node child, ToYaml(*it, field, depth + 1));
    if (j.is_object()) {
      out.force_insert(it.key(), child);
    } else {
      out.push_back(child);
    }
  }
  return out;
}

std::string KnownFields() {
  std::string known;
  for (const std::string& f : spec::JobFileFields()) {
    if (f != "export") known += (known.empty() ? "" : ", ") + f;
  }
  for (const char* f : kRestOnlyFields) known += std::string(", ") + f;
  return known;
}

// A REST-only field into `out`, or a job field into `fields`.
Status ApplyField(const std::string& key, const Json& v, SubmitBody& out, YAML::Node& fields) {
  if (v.is_null()) return Status::Ok();  // a client's "not set"
  if (key == "idempotency_key") {
    if (!v.is_string()) return WrongType(key, v, "a string");
    out.idempotency_key = v.get<std::string>();
    return Status::Ok();
  }
  if (key == "array") {  // "0-999", as `submit --array`
    if (!v.is_string()) return WrongType(key, v, "a string such as \"0-999\"");
    GS_ASSIGN_OR_RETURN(out.array, ParseIndexRange(v.get<std::string>(), core::kMaxArrayTasks, key));
    return Status::Ok();
  }
  if (key == "export") {
    return InvalidArgument("export: names variables of the submitting shell, which a REST call "
                           "does not have; give them in \"env\" instead");
  }
  const std::vector<std::string>& job = spec::JobFileFields();
  if (std::find(job.begin(), job.end(), key) == job.end()) {
    return InvalidArgument(Quote(key) + ": unknown field (known: " + KnownFields() + ")");
  }
  GS_ASSIGN_OR_RETURN(YAML::Node value, ToYaml(v, key));
  fields.force_insert(key, value);
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
  YAML::Node fields(YAML::NodeType::Map);
  for (auto it = j.begin(); it != j.end(); ++it) {
    GS_RETURN_IF_ERROR(ApplyField(it.key(), *it, out, fields));
  }
  GS_ASSIGN_OR_RETURN(spec::JobFile job, spec::ParseJobFileNode(fields, ""));
  out.spec = std::move(job.spec);
  if (out.spec.command.empty()) {
    return InvalidArgument("command: missing; give the task's command as an array of strings, "
                           "e.g. [\"python3\", \"train.py\"], or a string for /bin/sh -c");
  }
  // A job file's relative workdir is taken from where `submit` runs; a REST call has no such
  // directory.
  if (!out.spec.workdir.empty() && out.spec.workdir[0] != '/') {
    return InvalidArgument("workdir: " + Quote(out.spec.workdir) +
                           " is not an absolute path (over REST give the node's directory in "
                           "full)");
  }
  return out;
}

}  // namespace gpusched::server::rest
