#include "rpc/json.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace gpusched::rpc {

int64_t ElapsedMs(const ::gpusched::v1::Task& t, int64_t now_ms) {
  if (t.started_ms() <= 0) return 0;
  const int64_t end = t.finished_ms() >= t.started_ms() ? t.finished_ms() : now_ms;
  return std::max<int64_t>(0, end - t.started_ms());
}

namespace {

// What the task asked for: its spec's resources, limits, gang and priority, its node rules
// (CN115981827A claim 1) and the memory-table profile (CN109992422A claim 1).
nlohmann::json RequestJson(const ::gpusched::v1::TaskSpec& s) {
  auto optional = [](bool has, int64_t v) { return has ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json r = {
      {"gpus", s.gpus()},
      {"gpu_mem_mib", s.gpu_mem_mib()},
      {"cpu_milli", s.cpu_milli()},
      {"mem_mib", s.mem_mib()},
      {"duration_ms", optional(s.has_duration_ms(), s.duration_ms())},
      {"time_limit_ms", optional(s.has_time_limit_ms(), s.time_limit_ms())},
      {"heartbeat_timeout_ms", optional(s.has_heartbeat_timeout_ms(), s.heartbeat_timeout_ms())},
      {"retries", optional(s.has_max_retries(), s.max_retries())},
      {"keep_pending", s.keep_pending()},
      {"nodes", s.nodes() == 0 ? 1 : s.nodes()},
      {"tasks_per_node", s.tasks_per_node() == 0 ? 1 : s.tasks_per_node()},
      {"gang_timeout_ms", optional(s.has_gang_timeout_ms(), s.gang_timeout_ms())},
      {"priority_class", s.priority_class()},
      {"preemptible", !s.has_preemptible() || s.preemptible()},
      {"grace_ms", optional(s.has_grace_ms(), s.grace_ms())},
      {"signal", optional(s.has_stop_signal(), s.stop_signal())}};
  // Kubernetes-style rules (CN115981827A claim 1), ordered by key: the same bytes each time.
  r["node_selector"] =
      std::map<std::string, std::string>(s.node_selector().begin(), s.node_selector().end());
  nlohmann::json tolerations = nlohmann::json::array();
  for (const auto& tol : s.tolerations()) {
    tolerations.push_back({{"key", tol.key()},
                           {"operator", tol.exists() ? "Exists" : "Equal"},
                           {"value", tol.value()},
                           {"effect", tol.effect()}});
  }
  r["tolerations"] = tolerations;
  if (s.has_profile()) {  // CN109992422A claim 1: the memory table gave gpu_mem_mib
    const auto& p = s.profile();
    r["profile"] = {{"task_type", p.task_type()},
                    {"model", p.model()},
                    {"batch", p.batch()},
                    {"height", p.height()},
                    {"width", p.width()}};
  }
  return r;
}

// How it runs: GPU use, executor status, gang ranks, preemptions and checkpoints, history.
void AddRunJson(const ::gpusched::v1::Task& t, nlohmann::json& j) {
  // A running task's GPU use from its heartbeats (CN109992422A claim 7); null = not reported.
  j["gpu_util"] = t.has_gpu_util() ? nlohmann::json(t.gpu_util()) : nlohmann::json(nullptr);
  j["gpu_mem_used_mib"] =
      t.has_gpu_mem_used_mib() ? nlohmann::json(t.gpu_mem_used_mib()) : nlohmann::json(nullptr);
  j["idle_since_ms"] = t.idle_since_ms();
  j["idle"] = t.idle();
  // A running task's last task heartbeat (CN109992422A claims 7-8): what its executor saw
  // ("" = not reported) and when it was last seen alive (0 = not running).
  j["executor_status"] = t.executor_status();
  j["executor_detail"] = t.executor_detail();
  j["last_heartbeat_ms"] = t.last_heartbeat_ms();
  // A gang: its nodes in rank order (rank 0 first) and the ranks that exited 0 this attempt.
  j["nodes"] = std::vector<std::string>(t.gang_nodes().begin(), t.gang_nodes().end());
  if (t.gang_nodes_size() == 0 && !t.node().empty()) j["nodes"] = {t.node()};
  j["ranks_done"] = std::vector<int>(t.ranks_done().begin(), t.ranks_done().end());
  // Priority class value, and who preempted it last (null = nobody).
  j["priority"] = t.priority();
  j["preempted_by"] =
      t.preempted_by() != 0 ? nlohmann::json(t.preempted_by()) : nlohmann::json(nullptr);
  j["preemptions"] = t.preemptions();
  // Issue 37: preempted attempts that exited 0 within their grace; the latest (null = none).
  j["checkpoints"] = t.checkpoints();
  j["checkpointed"] = t.checkpoints() > 0;
  j["checkpointed_attempt"] = t.checkpointed_attempt() != 0
                                  ? nlohmann::json(t.checkpointed_attempt())
                                  : nlohmann::json(nullptr);
  if (t.history_size() > 0) {
    nlohmann::json h = nlohmann::json::array();
    for (const auto& x : t.history()) {
      h.push_back({{"at_ms", x.at_ms()}, {"state", x.state()}, {"reason", x.reason()}});
    }
    j["history"] = h;
  }
}

}  // namespace

nlohmann::json TaskJson(const ::gpusched::v1::Task& t, int64_t now_ms) {
  nlohmann::json j = {{"id", t.id()},
                      {"name", t.name()},
                      {"state", t.state()},
                      {"node", t.node()},
                      {"gpus", std::vector<int>(t.gpus().begin(), t.gpus().end())},
                      {"exit_code", nullptr},
                      {"attempts", t.attempts()},
                      {"reason", t.reason()},
                      {"fail_cnt", t.fail_cnt()},
                      {"pt", t.pt()},
                      {"gpu_mem_mib", t.gpu_mem_need_mib()},
                      {"mem_source", t.mem_source()},
                      {"topology_rule", t.topology_rule()},
                      {"submitted_ms", t.submitted_ms()},
                      {"started_ms", t.started_ms()},
                      {"finished_ms", t.finished_ms()},
                      {"command", std::vector<std::string>(t.spec().command().begin(),
                                                           t.spec().command().end())}};
  if (t.has_exit_code()) j["exit_code"] = t.exit_code();
  // Issue 41: why a failed or cancelled task ended (null otherwise), and its job array.
  j["failure"] = t.failure().empty() ? nlohmann::json() : nlohmann::json(t.failure());
  j["array"] = t.has_array() ? nlohmann::json{{"id", t.array().id()},
                                               {"index", t.array().index()},
                                               {"first", t.array().first()},
                                               {"last", t.array().last()}}
                             : nlohmann::json();
  // Issue 40: `state` is the stored one; the change not stored yet is said apart.
  if (!t.unstored_state().empty()) j["unstored_state"] = t.unstored_state();
  const auto& s = t.spec();
  j["request"] = RequestJson(s);
  j["workdir"] = s.workdir();
  // The task's own environment (its owner's and admins' to read: issue 36), and what of the
  // spec this caller may not read and the server left empty ("env", "command", "workdir").
  j["env"] = std::map<std::string, std::string>(s.env().begin(), s.env().end());
  j["redacted"] = std::vector<std::string>(t.redacted().begin(), t.redacted().end());
  // Whose task it is, as accounting counts it (server/accounting.h OwnerOf): "" = "default".
  j["user"] = s.user().empty() ? "default" : s.user();
  j["team"] = s.team().empty() ? "default" : s.team();
  j["elapsed_ms"] = ElapsedMs(t, now_ms);
  AddRunJson(t, j);
  return j;
}

std::string NodeStateName(const ::gpusched::v1::Node& n) {
  if (!n.connected()) return "disconnected";
  if (!n.available()) return n.lost() ? "lost" : "unreachable";  // silent: issue 37
  if (!n.reachable()) return "unreachable";
  if (n.draining()) return n.running_tasks() > 0 ? "draining" : "drained";
  if (n.cordoned()) return "cordoned";
  return "ready";
}

nlohmann::json NodeJson(const ::gpusched::v1::Node& n) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : n.gpus()) {
    gpus.push_back({{"index", g.index()},
                    {"model", g.model()},
                    {"total_mib", g.total_mib()},
                    {"allocated_mib", g.allocated_mib()},
                    {"reported_free_mib", g.reported_free_mib()},
                    {"tasks", g.tasks()},
                    {"healthy", !g.unhealthy()},
                    {"last_error", g.last_error()}});
  }
  nlohmann::json taints = nlohmann::json::array();
  for (const auto& t : n.taints()) {
    taints.push_back({{"key", t.key()}, {"value", t.value()}, {"effect", t.effect()}});
  }
  return {{"name", n.name()},
          {"address", n.address()},
          {"connected", n.connected()},
          {"reachable", n.reachable()},
          {"available", n.available()},
          {"lost", n.lost()},  // issue 37: silent past node_lost_after (issue 39: node rm)
          {"cordoned", n.cordoned()},
          {"draining", n.draining()},
          {"running_tasks", n.running_tasks()},
          // Issue 42 (CN110955526B claim 2 across nodes): what a Spark driver's stage plan
          // reads. free_cpus is whole CPUs not reserved by the tasks placed there.
          {"cpu_milli", n.cpu_milli()},
          {"cpu_allocated_milli", n.cpu_allocated_milli()},
          {"free_cpus", std::max<int64_t>(0, n.cpu_milli() - n.cpu_allocated_milli()) / 1000},
          {"mem_mib", n.mem_mib()},
          {"mem_allocated_mib", n.mem_allocated_mib()},
          {"gpus", gpus},
          {"labels", std::map<std::string, std::string>(n.labels().begin(), n.labels().end())},
          {"taints", taints}};
}

nlohmann::json WhyJson(const ::gpusched::v1::WhyResponse& w) {
  nlohmann::json j = {{"id", w.id()},
                      {"state", w.state()},
                      {"summary", w.summary()},
                      {"queue", w.queue()},
                      {"pt", w.pt()},
                      {"st", w.st()},
                      {"claim_status", w.claim_status()},
                      {"fail_cnt", w.fail_cnt()},
                      {"placement_failures", w.placement_failures()},
                      {"total_nodes", w.total_nodes()},
                      {"feasible_nodes", w.feasible_nodes()},
                      {"examined_nodes", w.examined_nodes()},
                      {"chosen_node", w.chosen_node()},
                      {"topology_rule", w.topology_rule()},
                      {"need", w.need()},
                      {"score", w.score()}};
  // Ordered by filter name: the same bytes for the same answer.
  j["rejected"] = std::map<std::string, int64_t>(w.rejected().begin(), w.rejected().end());
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& p : w.breakdown()) {
    parts.push_back({{"name", p.name()}, {"value", p.value()}, {"weight", p.weight()}});
  }
  j["breakdown"] = parts;
  j["pass"] = w.pass();  // issue 37: the pass that produced the reason, and its age
  j["pass_age_ms"] = w.pass_age_ms();
  j["waits_for"] = w.waits_for();
  return j;
}

}  // namespace gpusched::rpc
