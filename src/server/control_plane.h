#pragma once
// ControlPlane: the server's state and its one lock. It owns core::Scheduler (the decisions),
// the StateStore (durability) and the connected agents, runs the scheduling loop, and turns
// every event (API call, agent message, probe result, time) into scheduler calls followed by
// Flush: persist changed tasks, then send assignments and kills to agents. That order is the
// DESIGN.md pipeline: an acknowledged task and a reservation are stored before anyone acts.
//
// Thread-safety: every public method is safe to call from any thread (one mutex).

#include <array>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "core/scheduler.h"
#include "rpc/convert.h"
#include "server/agent_connection.h"
#include "server/metrics.h"
#include "server/server_config.h"
#include "store/state_store.h"

namespace gpusched::server {

class ControlPlane {
 public:
  // Restores every stored node, task and memory observation. Restored nodes stay unreachable
  // until their agent reconnects; their running tasks keep their reservations meanwhile.
  static StatusOr<std::unique_ptr<ControlPlane>> Create(const ServerConfig& config, Clock& clock,
                                                        std::unique_ptr<store::StateStore> store);
  ~ControlPlane();

  // The scheduling loop: a pass on every event and at least every t1; liveness every tick.
  void StartLoop();
  void StopLoop();

  // ---- API ----
  StatusOr<TaskId> Submit(core::TaskSpec spec);
  StatusOr<v1::Task> GetTask(uint64_t id, bool with_history);
  std::vector<v1::Task> ListTasks(std::optional<core::TaskState> state);
  StatusOr<v1::Task> Cancel(uint64_t id);
  StatusOr<v1::WhyResponse> Why(uint64_t id);
  std::vector<v1::Node> ListNodes();
  StatusOr<v1::Node> Cordon(const std::string& node, bool cordon);
  StatusOr<v1::Node> Drain(const std::string& node);
  struct LogSource {
    std::string address;  // the agent's --listen address
    int64_t attempt = 0;
    bool done = false;
  };
  StatusOr<LogSource> LogSourceOf(uint64_t id);
  // Waits up to `timeout_ms` for task changes after `since`; returns the new version and
  // appends the ids that changed (all ids when `since` is too old for the change log).
  uint64_t WaitForChanges(uint64_t since, DurationMs timeout_ms, std::vector<uint64_t>& ids,
                          bool& everything);

  // ---- agents ----
  Status AgentRegistered(const core::NodeSpec& spec, std::shared_ptr<AgentConnection> conn);
  void AgentMessage(const std::string& node, const v1::AgentMessage& m, AgentConnection& conn);
  void AgentDisconnected(const std::string& node, const AgentConnection* conn);

  // ---- probe daemon (CN115981827A claim 9) ----
  std::vector<std::pair<std::string, std::string>> ProbeTargets();  // (node, address)
  void SetProbeResult(const std::string& node, bool reachable);

  // ---- observability ----
  std::string MetricsText();
  const ServerConfig& config() const { return config_; }

 private:
  ControlPlane(const ServerConfig& config, Clock& clock, std::unique_ptr<store::StateStore> store,
               std::unique_ptr<core::Scheduler> scheduler);
  Status Restore();
  void LoopMain();
  void Kick();
  // REQUIRES: mu_ held.
  Status Flush();
  void SendActions(std::vector<core::Action>& actions, bool& again);
  void UpdateReachable(const std::string& node);
  Status PersistNode(const std::string& node);
  v1::Task TaskProto(const core::Task& t, bool with_history) const;
  StatusOr<v1::Node> NodeProto(const std::string& node) const;

  const ServerConfig config_;
  Clock& clock_;
  std::unique_ptr<store::StateStore> store_;

  mutable std::mutex mu_;
  std::condition_variable changes_cv_;
  std::unique_ptr<core::Scheduler> sched_;
  std::unordered_map<TaskId, core::Placement> last_placement_;
  // What was last written per task (state, attempts, fail_cnt, Pt, history length). A pass
  // marks every waiting task changed (its placement_failures and reason move), which would
  // rewrite the whole queue on every pass; those records are written again only when this
  // fingerprint changes, so a restart may show a waiting task's previous reason.
  std::unordered_map<TaskId, std::array<int64_t, 5>> persisted_;
  std::map<std::string, std::shared_ptr<AgentConnection>> connections_;
  std::map<std::string, bool> probe_ok_;
  uint64_t version_ = 0;
  std::deque<std::pair<uint64_t, uint64_t>> change_log_;  // (version, task id)
  int64_t store_errors_ = 0;
  int64_t submitted_ = 0;
  Histogram pass_seconds_{{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                           0.1, 0.25, 1}};

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool kicked_ = false;
  bool stop_ = false;
  std::thread loop_;
};

}  // namespace gpusched::server
