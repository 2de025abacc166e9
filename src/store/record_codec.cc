#include "store/record_codec.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <vector>

namespace gpusched::store {
namespace {

using Json = nlohmann::json;

// Kept per task in the store: enough for `show`, bounded so a task retried forever does not
// grow without limit.
constexpr size_t kMaxStoredTransitions = 64;

Json ProfileJson(const core::MemoryProfile& m) {
  return {{"task_type", m.task_type}, {"model", m.model}, {"batch", m.batch},
          {"height", m.height},       {"width", m.width}};
}
core::MemoryProfile ProfileFrom(const Json& j) {
  return {j.at("task_type").get<std::string>(), j.at("model").get<std::string>(),
          j.at("batch").get<int64_t>(), j.at("height").get<int64_t>(),
          j.at("width").get<int64_t>()};
}

core::Placement PlacementFrom(const Json& j) {
  core::Placement p;
  p.node = j.at("node").get<std::string>();
  p.gpus = j.at("gpus").get<std::vector<int>>();
  p.gpu_mem_mib = j.at("gpu_mem_mib").get<std::vector<MiB>>();
  p.resources = {j.at("cpu_milli").get<int64_t>(), j.at("mem_mib").get<int64_t>()};
  p.exclusive = j.at("exclusive").get<bool>();
  return p;
}

core::TaskSpec SpecFrom(const Json& j) {
  core::TaskSpec s;
  s.name = j.at("name").get<std::string>();
  s.gpus = j.at("gpus").get<int64_t>();
  s.gpu_mem_mib = j.at("gpu_mem_mib").get<int64_t>();
  s.gpu_model = j.at("gpu_model").get<std::string>();
  s.resources = {j.at("cpu_milli").get<int64_t>(), j.at("mem_mib").get<int64_t>()};
  s.node_selector = j.at("node_selector").get<std::map<std::string, std::string>>();
  for (const Json& t : j.at("tolerations")) {
    s.tolerations.push_back({t.at("key").get<std::string>(), t.at("value").get<std::string>(),
                             t.at("exists").get<bool>(), t.at("has_effect").get<bool>(),
                             static_cast<core::TaintEffect>(t.at("effect").get<int>())});
  }
  s.keep_pending_if_infeasible = j.at("keep_pending").get<bool>();
  s.command = j.at("command").get<std::vector<std::string>>();
  s.env = j.at("env").get<std::map<std::string, std::string>>();
  if (j.contains("profile")) s.profile = ProfileFrom(j.at("profile"));
  if (j.contains("duration_ms")) s.duration_ms = j.at("duration_ms").get<int64_t>();
  if (j.contains("max_retries")) s.max_retries = j.at("max_retries").get<int64_t>();
  if (j.contains("time_limit_ms")) s.time_limit_ms = j.at("time_limit_ms").get<int64_t>();
  if (j.contains("heartbeat_timeout_ms")) {
    s.heartbeat_timeout_ms = j.at("heartbeat_timeout_ms").get<int64_t>();
  }
  if (j.contains("workdir")) s.workdir = j.at("workdir").get<std::string>();
  if (j.contains("user")) s.user = j.at("user").get<std::string>();
  if (j.contains("team")) s.team = j.at("team").get<std::string>();
  // Gangs and priority classes; absent in records of earlier versions.
  if (j.contains("nodes")) s.nodes = j.at("nodes").get<int64_t>();
  if (j.contains("tasks_per_node")) s.tasks_per_node = j.at("tasks_per_node").get<int64_t>();
  if (j.contains("gang_timeout_ms")) s.gang_timeout_ms = j.at("gang_timeout_ms").get<int64_t>();
  if (j.contains("priority_class")) s.priority_class = j.at("priority_class").get<std::string>();
  if (j.contains("preemptible")) s.preemptible = j.at("preemptible").get<bool>();
  if (j.contains("grace_ms")) s.grace_ms = j.at("grace_ms").get<int64_t>();
  if (j.contains("stop_signal")) s.stop_signal = j.at("stop_signal").get<int>();
  if (j.contains("array")) {  // issue 41: [index, first, last]
    const Json& a = j.at("array");
    s.array = core::ArrayMember{a.at(0).get<int64_t>(), a.at(1).get<int64_t>(),
                                a.at(2).get<int64_t>()};
  }
  return s;
}

// Records hold integers only, and nlohmann's get<int>() of a floating-point value is an
// unchecked cast (undefined beyond the type's range, e.g. an id of 1e20): a corrupt record
// with a non-integer number is rejected before any field is read. Iterative: a corrupt row
// may nest deeply.
void RequireIntegers(const Json& root) {
  std::vector<const Json*> todo = {&root};
  while (!todo.empty()) {
    const Json* j = todo.back();
    todo.pop_back();
    if (j->is_number_float()) throw std::invalid_argument(j->dump() + " is not an integer");
    if (j->is_structured()) {
      for (const Json& child : *j) todo.push_back(&child);
    }
  }
}

template <typename Fn>
auto Decode(const std::string& text, const char* what, Fn&& fn) -> decltype(fn(Json())) {
  try {
    const Json j = Json::parse(text);
    RequireIntegers(j);
    return fn(j);
  } catch (const std::exception& e) {  // parse and type errors of a corrupt row
    return DataLoss(std::string(what) + ": corrupt stored record: " + e.what());
  }
}

// EncodeTask runs for every task write (several per task), so it writes the JSON directly
// instead of building an nlohmann tree (several times fewer instructions). The text
// is exactly what nlohmann's dump() gives for the same tree: no spaces, the same escapes
// (strings that are not plain printable ASCII go through nlohmann itself), and keys in
// sorted order, which is why every object below lists its fields alphabetically
// (record_codec checks it: RecordCodecTest.TaskTextIsCanonicalJson).
class Writer {
 public:
  // Appends `"key":value`. REQUIRES: keys in ascending byte order.
  void Str(const char* key, const std::string& v) { Key(key) += Quote(v); }
  void Int(const char* key, int64_t v) { Key(key) += std::to_string(v); }
  void Uint(const char* key, uint64_t v) { Key(key) += std::to_string(v); }
  void Bool(const char* key, bool v) { Key(key) += v ? "true" : "false"; }
  void Raw(const char* key, const std::string& json) { Key(key) += json; }
  std::string Done() { return std::move(out_ += '}'); }

  static std::string Quote(const std::string& s) {
    for (const char c : s) {
      if (c < 0x20 || c == '"' || c == '\\' || static_cast<unsigned char>(c) >= 0x7f) {
        return Json(s).dump();
      }
    }
    return '"' + s + '"';
  }
  template <typename T>
  static std::string Ints(const std::vector<T>& v) {
    std::string out = "[";
    for (const T& x : v) out += (out.size() > 1 ? "," : "") + std::to_string(x);
    return out += ']';
  }
  static std::string Strings(const std::vector<std::string>& v) {
    std::string out = "[";
    for (const std::string& x : v) out += (out.size() > 1 ? "," : "") + Quote(x);
    return out += ']';
  }
  static std::string Map(const std::map<std::string, std::string>& m) {  // already sorted
    std::string out = "{";
    for (const auto& [k, v] : m) out += (out.size() > 1 ? "," : "") + Quote(k) + ":" + Quote(v);
    return out += '}';
  }

 private:
  std::string& Key(const char* key) {
    out_ += out_.size() > 1 ? ",\"" : "\"";
    out_ += key;
    return out_ += "\":";
  }
  std::string out_ = "{";
};

std::string PlacementJson(const core::Placement& p) {
  Writer w;
  w.Int("cpu_milli", p.resources.cpu_milli);
  w.Bool("exclusive", p.exclusive);
  w.Raw("gpu_mem_mib", Writer::Ints(p.gpu_mem_mib));
  w.Raw("gpus", Writer::Ints(p.gpus));
  w.Int("mem_mib", p.resources.mem_mib);
  w.Str("node", p.node);
  return w.Done();
}

std::string SpecJson(const core::TaskSpec& s) {
  std::string tol = "[";
  for (const core::Toleration& t : s.tolerations) {
    Writer tw;
    tw.Int("effect", static_cast<int>(t.effect));
    tw.Bool("exists", t.exists);
    tw.Bool("has_effect", t.has_effect);
    tw.Str("key", t.key);
    tw.Str("value", t.value);
    tol += (tol.size() > 1 ? "," : "") + tw.Done();
  }
  tol += ']';
  Writer w;
  if (s.array) {
    w.Raw("array", Writer::Ints(std::vector<int64_t>{s.array->index, s.array->first,
                                                     s.array->last}));
  }
  w.Raw("command", Writer::Strings(s.command));
  w.Int("cpu_milli", s.resources.cpu_milli);
  if (s.duration_ms) w.Int("duration_ms", *s.duration_ms);
  w.Raw("env", Writer::Map(s.env));
  w.Int("gpu_mem_mib", s.gpu_mem_mib);
  w.Str("gpu_model", s.gpu_model);
  if (s.gang_timeout_ms) w.Int("gang_timeout_ms", *s.gang_timeout_ms);
  w.Int("gpus", s.gpus);
  if (s.grace_ms) w.Int("grace_ms", *s.grace_ms);
  if (s.heartbeat_timeout_ms) w.Int("heartbeat_timeout_ms", *s.heartbeat_timeout_ms);
  w.Bool("keep_pending", s.keep_pending_if_infeasible);
  if (s.max_retries) w.Int("max_retries", *s.max_retries);
  w.Int("mem_mib", s.resources.mem_mib);
  w.Str("name", s.name);
  w.Raw("node_selector", Writer::Map(s.node_selector));
  if (s.nodes != 1) w.Int("nodes", s.nodes);
  if (!s.preemptible) w.Bool("preemptible", false);
  if (!s.priority_class.empty()) w.Str("priority_class", s.priority_class);
  if (s.profile) w.Raw("profile", ProfileJson(*s.profile).dump());
  if (s.stop_signal) w.Int("stop_signal", *s.stop_signal);
  if (s.tasks_per_node != 1) w.Int("tasks_per_node", s.tasks_per_node);
  if (!s.team.empty()) w.Str("team", s.team);
  if (s.time_limit_ms) w.Int("time_limit_ms", *s.time_limit_ms);
  w.Raw("tolerations", tol);
  if (!s.user.empty()) w.Str("user", s.user);
  if (!s.workdir.empty()) w.Str("workdir", s.workdir);
  return w.Done();
}

// The latest kMaxStoredTransitions transitions: [[at_ms, state, reason], ...].
std::string HistoryJson(const std::vector<core::Transition>& history) {
  std::string hist = "[";
  const size_t first =
      history.size() > kMaxStoredTransitions ? history.size() - kMaxStoredTransitions : 0;
  for (size_t i = first; i < history.size(); ++i) {
    const core::Transition& h = history[i];
    if (hist.size() > 1) hist += ',';
    hist += '[' + std::to_string(h.at_ms) + ',' + std::to_string(static_cast<int>(h.state)) +
            ',' + Writer::Quote(h.reason) + ']';
  }
  return hist + ']';
}

// Upper bounds for EncodedTaskBound: a string's JSON (quotes and a 6-byte escape per byte at
// worst, a separator), a field's name and number, a placement.
constexpr size_t kField = 48;  // "name": with a separator, or a number of up to 20 digits
size_t StrBound(const std::string& s) { return 6 * s.size() + 3; }
size_t MapBound(const std::map<std::string, std::string>& m) {
  size_t n = 2;
  for (const auto& [k, v] : m) n += StrBound(k) + StrBound(v) + 1;
  return n;
}
size_t PlacementBound(const core::Placement& p) {
  return 8 * kField + StrBound(p.node) + (p.gpus.size() + p.gpu_mem_mib.size()) * 21;
}

size_t SpecBound(const core::TaskSpec& s) {
  size_t n = 40 * kField + MapBound(s.env) + MapBound(s.node_selector);
  for (const std::string& c : s.command) n += StrBound(c);
  for (const core::Toleration& t : s.tolerations) n += 6 * kField + StrBound(t.key) + StrBound(t.value);
  for (const std::string* str : {&s.name, &s.gpu_model, &s.priority_class, &s.team, &s.user,
                                 &s.workdir}) {
    n += StrBound(*str);
  }
  // The profile is an object whose JSON text is embedded again (escaped twice at worst).
  if (s.profile) n += 6 * (8 * kField + StrBound(s.profile->task_type) + StrBound(s.profile->model));
  return n;
}

}  // namespace

size_t EncodedTaskBound(const core::Task& t,
                        const std::optional<core::Placement>& last_placement) {
  size_t n = 40 * kField + SpecBound(t.spec) + StrBound(t.last_report_summary) +
             StrBound(t.mem_source) + StrBound(t.reason) + t.ranks_done.size() * 12;
  const size_t kept = std::min(t.history.size(), kMaxStoredTransitions);
  for (size_t i = t.history.size() - kept; i < t.history.size(); ++i) {
    n += 3 * kField + StrBound(t.history[i].reason);
  }
  for (const auto& [attempt, node] : t.attempt_nodes) n += kField + StrBound(node);
  if (t.placement) n += PlacementBound(*t.placement);
  if (last_placement) n += PlacementBound(*last_placement);
  for (const core::Placement& g : t.gang_placements) n += PlacementBound(g);
  return n;
}

std::string EncodeTask(const TaskRecord& r) {
  const core::Task& t = r.task;
  Writer w;
  w.Int("assigned_ms", t.assigned_ms);
  if (!t.attempt_nodes.empty()) {
    std::map<std::string, std::string> nodes;  // Writer::Map sorts by text; decode reorders
    for (const auto& [attempt, node] : t.attempt_nodes) nodes[std::to_string(attempt)] = node;
    w.Raw("attempt_nodes", Writer::Map(nodes));
  }
  w.Int("attempts", t.attempts);
  w.Int("base_pt", t.base_pt);
  if (t.checkpointed_attempt > 0) w.Int("checkpointed_attempt", t.checkpointed_attempt);
  if (t.checkpoints > 0) w.Int("checkpoints", t.checkpoints);
  w.Int("claim", static_cast<int>(t.claim));
  w.Bool("exclusive", t.exclusive);
  if (t.exit_code) w.Int("exit_code", *t.exit_code);
  w.Int("fail_cnt", t.fail_cnt);
  if (t.failure != core::Failure::kNone) w.Str("failure", core::FailureName(t.failure));
  w.Int("finished_ms", t.finished_ms);
  if (!t.gang_placements.empty()) {
    std::string gang = "[";
    for (const core::Placement& g : t.gang_placements) {
      gang += (gang.size() > 1 ? "," : "") + PlacementJson(g);
    }
    w.Raw("gang", gang + "]");
  }
  w.Int("gpu_mem_need_mib", t.gpu_mem_need_mib);
  w.Raw("history", HistoryJson(t.history));
  w.Uint("id", t.id.value());
  if (r.last_placement) w.Raw("last_placement", PlacementJson(*r.last_placement));
  w.Str("last_report", t.last_report_summary);
  w.Str("mem_source", t.mem_source);
  if (t.placement) w.Raw("placement", PlacementJson(*t.placement));
  w.Int("placement_failures", t.placement_failures);
  if (t.preemptions > 0) w.Int("preemptions", t.preemptions);
  w.Int("pt", t.pt);
  if (!t.ranks_done.empty()) {
    std::string ranks = "[";
    for (int rank : t.ranks_done) ranks += (ranks.size() > 1 ? "," : "") + std::to_string(rank);
    w.Raw("ranks_done", ranks + "]");
  }
  w.Str("reason", t.reason);
  w.Uint("seq", t.seq);
  w.Raw("spec", SpecJson(t.spec));
  w.Int("st", t.st);
  w.Int("state", static_cast<int>(t.state));
  w.Int("submitted_ms", t.submitted_ms);
  w.Int("v", 1);
  return w.Done();
}

StatusOr<TaskRecord> DecodeTask(const std::string& text) {
  return Decode(text, "task", [](const Json& j) -> StatusOr<TaskRecord> {
    if (j.at("v").get<int>() != 1) return DataLoss("task: unknown record version");
    TaskRecord r;
    core::Task& t = r.task;
    t.id = TaskId(j.at("id").get<uint64_t>());
    t.spec = SpecFrom(j.at("spec"));
    t.gpu_mem_need_mib = j.at("gpu_mem_need_mib").get<int64_t>();
    t.exclusive = j.at("exclusive").get<bool>();
    t.mem_source = j.at("mem_source").get<std::string>();
    t.st = j.at("st").get<int>();
    t.base_pt = j.at("base_pt").get<int>();
    t.pt = j.at("pt").get<int>();
    t.seq = j.at("seq").get<uint64_t>();
    const int state = j.at("state").get<int>();
    if (state < 0 || state > static_cast<int>(core::TaskState::kPreempted)) {
      return DataLoss("task " + t.id.ToString() + ": state: " + std::to_string(state));
    }
    t.state = static_cast<core::TaskState>(state);
    t.claim = static_cast<core::ClaimStatus>(j.at("claim").get<int>());
    t.fail_cnt = j.at("fail_cnt").get<int64_t>();
    t.placement_failures = j.at("placement_failures").get<int64_t>();
    t.attempts = j.at("attempts").get<int64_t>();
    t.submitted_ms = j.at("submitted_ms").get<int64_t>();
    t.assigned_ms = j.at("assigned_ms").get<int64_t>();
    t.finished_ms = j.at("finished_ms").get<int64_t>();
    t.reason = j.at("reason").get<std::string>();
    t.last_report_summary = j.at("last_report").get<std::string>();
    for (const Json& h : j.at("history")) {
      t.history.push_back({h.at(0).get<int64_t>(), static_cast<core::TaskState>(h.at(1).get<int>()),
                           h.at(2).get<std::string>()});
    }
    if (j.contains("placement")) t.placement = PlacementFrom(j.at("placement"));
    if (j.contains("exit_code")) t.exit_code = j.at("exit_code").get<int>();
    if (j.contains("last_placement")) r.last_placement = PlacementFrom(j.at("last_placement"));
    if (j.contains("gang")) {
      for (const Json& g : j.at("gang")) t.gang_placements.push_back(PlacementFrom(g));
    }
    if (j.contains("ranks_done")) {
      for (const Json& rank : j.at("ranks_done")) t.ranks_done.insert(rank.get<int>());
    }
    if (j.contains("preemptions")) t.preemptions = j.at("preemptions").get<int64_t>();
    if (j.contains("failure")) {  // issue 41
      const std::string name = j.at("failure").get<std::string>();
      std::optional<core::Failure> f = core::FailureFromName(name);
      if (!f) return DataLoss("task " + t.id.ToString() + ": failure: \"" + name + "\"");
      t.failure = *f;
    }
    if (j.contains("attempt_nodes")) {
      for (const auto& [attempt, node] : j.at("attempt_nodes").items()) {
        t.attempt_nodes[std::stoll(attempt)] = node.get<std::string>();
      }
    }
    if (j.contains("checkpoints")) t.checkpoints = j.at("checkpoints").get<int64_t>();
    if (j.contains("checkpointed_attempt")) {
      t.checkpointed_attempt = j.at("checkpointed_attempt").get<int64_t>();
    }
    return r;
  });
}

std::string EncodeNode(const NodeRecord& r) {
  Json gpus = Json::array();
  for (const core::GpuSpec& g : r.spec.gpus) gpus.push_back({g.model, g.total_mib});
  Json taints = Json::array();
  for (const core::Taint& t : r.spec.taints) {
    taints.push_back({t.key, t.value, static_cast<int>(t.effect)});
  }
  return Json{{"v", 1},
              {"name", r.spec.name},
              {"address", r.spec.address},
              {"cpu_milli", r.spec.capacity.cpu_milli},
              {"mem_mib", r.spec.capacity.mem_mib},
              {"gpus", gpus},
              {"labels", r.spec.labels},
              {"taints", taints},
              {"cordoned", r.cordoned},
              {"draining", r.draining}}
      .dump();
}

StatusOr<NodeRecord> DecodeNode(const std::string& text) {
  return Decode(text, "node", [](const Json& j) -> StatusOr<NodeRecord> {
    NodeRecord r;
    r.spec.name = j.at("name").get<std::string>();
    r.spec.address = j.at("address").get<std::string>();
    r.spec.capacity = {j.at("cpu_milli").get<int64_t>(), j.at("mem_mib").get<int64_t>()};
    for (const Json& g : j.at("gpus")) {
      r.spec.gpus.push_back({g.at(0).get<std::string>(), g.at(1).get<int64_t>()});
    }
    r.spec.labels = j.at("labels").get<std::map<std::string, std::string>>();
    for (const Json& t : j.at("taints")) {
      r.spec.taints.push_back({t.at(0).get<std::string>(), t.at(1).get<std::string>(),
                               static_cast<core::TaintEffect>(t.at(2).get<int>())});
    }
    r.cordoned = j.at("cordoned").get<bool>();
    r.draining = j.at("draining").get<bool>();
    return r;
  });
}

std::string EncodeProfile(const core::MemoryProfile& profile) {
  return ProfileJson(profile).dump();
}

StatusOr<core::MemoryProfile> DecodeProfile(const std::string& text) {
  return Decode(text, "memory profile",
                [](const Json& j) -> StatusOr<core::MemoryProfile> { return ProfileFrom(j); });
}

std::string EncodePeaks(const std::vector<MiB>& peaks) { return Json(peaks).dump(); }

StatusOr<std::vector<MiB>> DecodePeaks(const std::string& text) {
  return Decode(text, "learned peaks", [](const Json& j) -> StatusOr<std::vector<MiB>> {
    return j.get<std::vector<MiB>>();
  });
}

std::string EncodeToken(const TokenRecord& r) {
  Json j{{"v", 1},
         {"id", r.id},
         {"user", r.user},
         {"team", r.team},
         {"admin", r.admin},
         {"created_ms", r.created_ms},
         {"secret_sha256", r.secret_sha256}};
  if (!r.agent_node.empty()) j["agent_node"] = r.agent_node;  // absent: a user's token
  return j.dump();
}

StatusOr<TokenRecord> DecodeToken(const std::string& text) {
  return Decode(text, "token", [](const Json& j) -> StatusOr<TokenRecord> {
    TokenRecord r;
    r.id = j.at("id").get<std::string>();
    r.user = j.at("user").get<std::string>();
    r.team = j.at("team").get<std::string>();
    r.admin = j.at("admin").get<bool>();
    r.created_ms = j.at("created_ms").get<int64_t>();
    r.secret_sha256 = j.at("secret_sha256").get<std::string>();
    r.agent_node = j.value("agent_node", std::string());
    if (r.id.empty()) return DataLoss("token: id is empty");
    return r;
  });
}

namespace {

constexpr const char* kRollupSlotFields[] = {"gpu_mem_mib_ms", "gpu_micro_ms", "tasks"};

int64_t& SlotField(RollupSlot& slot, size_t field) {
  return field == 0 ? slot.gpu_mem_mib_ms : field == 1 ? slot.gpu_micro_ms : slot.tasks;
}

// A non-negative integer, or DataLoss naming `field`.
StatusOr<int64_t> RollupCount(const Json& j, const std::string& field) {
  const bool count = j.is_number_unsigned()  ? j.get<uint64_t>() <= uint64_t(INT64_MAX)
                     : j.is_number_integer() ? j.get<int64_t>() >= 0
                                             : false;
  if (!count) {
    return DataLoss("rollup: " + field + ": " + j.dump() + " is not a count (0 to 2^63-1)");
  }
  return j.get<int64_t>();
}

StatusOr<std::string> RollupName(const Json& j, const char* field) {
  if (!j.is_string() || j.get<std::string>().empty()) {
    return DataLoss(std::string("rollup: ") + field + ": " + j.dump() +
                    " is not a name (a non-empty string)");
  }
  return j.get<std::string>();
}

Status RollupSlots(const Json& j, size_t field, RollupRow& row) {
  const std::string name = kRollupSlotFields[field];
  if (!j.is_array() || j.size() != RollupRow::kHours) {
    return DataLoss("rollup: " + name + ": not an array of " +
                    std::to_string(RollupRow::kHours) + " hours");
  }
  for (size_t h = 0; h < j.size(); ++h) {
    GS_ASSIGN_OR_RETURN(SlotField(row.hours[h], field),
                        RollupCount(j[h], name + "[" + std::to_string(h) + "]"));
  }
  return Status::Ok();
}

StatusOr<RollupRow> RollupFrom(const Json& j) {
  if (!j.is_object()) return DataLoss("rollup: not an object");
  static const std::set<std::string> kFields = {"day",         "failure", "gpu_mem_mib_ms",
                                                "gpu_micro_ms", "tasks",   "team",
                                                "user",         "v"};
  for (const auto& [key, value] : j.items()) {
    if (kFields.count(key) == 0) return DataLoss("rollup: " + key + ": unknown field");
  }
  for (const std::string& key : kFields) {
    if (!j.contains(key)) return DataLoss("rollup: " + key + ": missing");
  }
  if (j.at("v") != 1) return DataLoss("rollup: v: " + j.at("v").dump() + " is not 1");
  RollupRow row;
  GS_ASSIGN_OR_RETURN(row.day, RollupCount(j.at("day"), "day"));
  GS_ASSIGN_OR_RETURN(row.team, RollupName(j.at("team"), "team"));
  GS_ASSIGN_OR_RETURN(row.user, RollupName(j.at("user"), "user"));
  GS_ASSIGN_OR_RETURN(row.failure, RollupName(j.at("failure"), "failure"));
  for (size_t f = 0; f < std::size(kRollupSlotFields); ++f) {
    GS_RETURN_IF_ERROR(RollupSlots(j.at(kRollupSlotFields[f]), f, row));
  }
  return row;
}

}  // namespace

std::string EncodeRollup(const RollupRow& row) {
  Json j = {{"v", 1},
            {"day", row.day},
            {"team", row.team},
            {"user", row.user},
            {"failure", row.failure}};
  for (size_t f = 0; f < std::size(kRollupSlotFields); ++f) {
    Json slots = Json::array();
    for (RollupSlot slot : row.hours) slots.push_back(SlotField(slot, f));
    j[kRollupSlotFields[f]] = std::move(slots);
  }
  return j.dump();
}

StatusOr<RollupRow> DecodeRollup(const std::string& text) {
  try {
    return RollupFrom(Json::parse(text));
  } catch (const std::exception& e) {  // not JSON
    return DataLoss(std::string("rollup: corrupt stored record: ") + e.what());
  }
}

}  // namespace gpusched::store
