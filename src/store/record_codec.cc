#include "store/record_codec.h"

#include <nlohmann/json.hpp>

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

Json PlacementJson(const core::Placement& p) {
  return {{"node", p.node},
          {"gpus", p.gpus},
          {"gpu_mem_mib", p.gpu_mem_mib},
          {"cpu_milli", p.resources.cpu_milli},
          {"mem_mib", p.resources.mem_mib},
          {"exclusive", p.exclusive}};
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

Json SpecJson(const core::TaskSpec& s) {
  Json tol = Json::array();
  for (const core::Toleration& t : s.tolerations) {
    tol.push_back({{"key", t.key}, {"value", t.value}, {"exists", t.exists},
                   {"has_effect", t.has_effect}, {"effect", static_cast<int>(t.effect)}});
  }
  Json j = {{"name", s.name},
            {"gpus", s.gpus},
            {"gpu_mem_mib", s.gpu_mem_mib},
            {"gpu_model", s.gpu_model},
            {"cpu_milli", s.resources.cpu_milli},
            {"mem_mib", s.resources.mem_mib},
            {"node_selector", s.node_selector},
            {"tolerations", tol},
            {"keep_pending", s.keep_pending_if_infeasible},
            {"command", s.command},
            {"env", s.env}};
  if (s.profile) j["profile"] = ProfileJson(*s.profile);
  if (s.duration_ms) j["duration_ms"] = *s.duration_ms;
  if (s.max_retries) j["max_retries"] = *s.max_retries;
  return j;
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
  return s;
}

template <typename Fn>
auto Decode(const std::string& text, const char* what, Fn&& fn) -> decltype(fn(Json())) {
  try {
    return fn(Json::parse(text));
  } catch (const std::exception& e) {  // parse and type errors of a corrupt row
    return DataLoss(std::string(what) + ": corrupt stored record: " + e.what());
  }
}

}  // namespace

std::string EncodeTask(const TaskRecord& r) {
  const core::Task& t = r.task;
  Json hist = Json::array();
  const size_t first = t.history.size() > kMaxStoredTransitions
                           ? t.history.size() - kMaxStoredTransitions
                           : 0;
  for (size_t i = first; i < t.history.size(); ++i) {
    const core::Transition& h = t.history[i];
    hist.push_back({h.at_ms, static_cast<int>(h.state), h.reason});
  }
  Json j = {{"v", 1},
            {"id", t.id.value()},
            {"spec", SpecJson(t.spec)},
            {"gpu_mem_need_mib", t.gpu_mem_need_mib},
            {"exclusive", t.exclusive},
            {"mem_source", t.mem_source},
            {"st", t.st},
            {"base_pt", t.base_pt},
            {"pt", t.pt},
            {"seq", t.seq},
            {"state", static_cast<int>(t.state)},
            {"claim", static_cast<int>(t.claim)},
            {"fail_cnt", t.fail_cnt},
            {"placement_failures", t.placement_failures},
            {"attempts", t.attempts},
            {"submitted_ms", t.submitted_ms},
            {"assigned_ms", t.assigned_ms},
            {"finished_ms", t.finished_ms},
            {"reason", t.reason},
            {"last_report", t.last_report_summary},
            {"history", hist}};
  if (t.placement) j["placement"] = PlacementJson(*t.placement);
  if (t.exit_code) j["exit_code"] = *t.exit_code;
  if (r.last_placement) j["last_placement"] = PlacementJson(*r.last_placement);
  return j.dump();
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
    if (state < 0 || state > static_cast<int>(core::TaskState::kCancelled)) {
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

}  // namespace gpusched::store
