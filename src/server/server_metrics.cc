#include "server/server_metrics.h"

#include <algorithm>
#include <map>

namespace gpusched::server {

// The per-team series (their label names a team).
void ServerMetrics::TeamMetrics(const core::Scheduler& sched, std::string& out) {
  MetricHeader("gpusched_team_gpu_seconds_total", "counter",
               "GPU-seconds used per team since this server leads (GPUs held x time; "
               "O(running tasks)).", out);
  for (const auto& [team, gpu_ms] : sched.TeamGpuMs()) {
    MetricLine("gpusched_team_gpu_seconds_total", "team=\"" + LabelValue(team) + "\"",
               gpu_ms / 1000.0, out);
  }
  // O(teams): the scheduler keeps the GPUs each team holds.
  std::map<std::string, int64_t> in_use;
  for (const auto& [team, q] : sched.quotas().quotas()) in_use[team] = 0;
  for (const auto& [team, u] : sched.team_usage()) in_use[team] = u.gpus;
  MetricHeader("gpusched_team_gpus_in_use", "gauge",
               "GPUs held per team by assigned or running tasks.", out);
  for (const auto& [team, gpus] : in_use) {
    MetricLine("gpusched_team_gpus_in_use", "team=\"" + LabelValue(team) + "\"", double(gpus),
               out);
  }
  MetricHeader("gpusched_team_borrowed_gpus", "gauge",
               "GPUs a team holds beyond its guaranteed GPUs.", out);
  for (const auto& [team, gpus] : in_use) {
    const int64_t over = gpus - sched.quotas().Of(team).guaranteed_gpus;
    MetricLine("gpusched_team_borrowed_gpus", "team=\"" + LabelValue(team) + "\"",
               double(std::max<int64_t>(0, over)), out);
  }
}

// The queues and the tasks by state.
void ServerMetrics::TaskMetrics(const Sources& s, std::string& out) const {
  // Issue 41: label values in users' words; the patent's names stay in the help text.
  MetricHeader("gpusched_queue_depth", "gauge",
               "Tasks waiting, by queue: main (CN115981827A's Q) and retry (its failure queue "
               "FQ).",
               out);
  MetricLine("gpusched_queue_depth", "queue=\"main\"", double(s.sched.main_queue_size()), out);
  MetricLine("gpusched_queue_depth", "queue=\"retry\"", double(s.sched.failure_queue_size()),
             out);
  const std::map<std::string, int64_t> by_state = s.index.CountsByState();
  MetricHeader("gpusched_tasks", "gauge", "Tasks by state (finished ones from the store too).",
               out);
  for (const auto& [state, n] : by_state) {
    MetricLine("gpusched_tasks", "state=\"" + state + "\"", double(n), out);
  }
  MetricHeader("gpusched_tasks_in_memory", "gauge",
               "Task records the server holds in memory (live and recently finished).", out);
  MetricLine("gpusched_tasks_in_memory", "", double(s.sched.task_count()), out);
  MetricHeader("gpusched_idle_tasks", "gauge",
               "Running tasks at 0 % GPU utilisation for idle_after or longer.", out);
  MetricLine("gpusched_idle_tasks", "", double(s.sched.idle_tasks()), out);
  MetricHeader("gpusched_tasks_submitted_total", "counter", "Tasks accepted.", out);
  MetricLine("gpusched_tasks_submitted_total", "", double(submitted_), out);
}

// Passes, decisions, failures and the nodes' liveness.
void ServerMetrics::SchedulingMetrics(const Sources& src, std::string& out) {
  const core::Scheduler& sched = src.sched;
  const core::SchedulerStats& s = sched.stats();
  MetricHeader("gpusched_scheduling_passes_total", "counter", "Scheduling passes.", out);
  MetricLine("gpusched_scheduling_passes_total", "", double(s.passes), out);
  MetricHeader("gpusched_decisions_total", "counter", "Placement attempts, by result.", out);
  MetricLine("gpusched_decisions_total", "result=\"placed\"", double(s.placed), out);
  MetricLine("gpusched_decisions_total", "result=\"waiting\"", double(s.decisions - s.placed),
             out);
  MetricHeader("gpusched_parallel_filter_decisions_total", "counter",
               "Placement attempts whose node filter ran in chunks on the filter pool "
               "(reachable nodes above parallel_threshold).", out);
  MetricLine("gpusched_parallel_filter_decisions_total", "", double(s.parallel_decisions), out);
  MetricHeader("gpusched_filter_workers", "gauge",
               "Threads lent to the scheduler for the parallel node filter (1 = none).", out);
  MetricLine("gpusched_filter_workers", "", double(src.filter_workers),
             out);
  MetricHeader("gpusched_execution_failures_total", "counter", "Execution failures.", out);
  MetricLine("gpusched_execution_failures_total", "", double(s.execution_failures), out);
  MetricHeader("gpusched_nodes_lost_total", "counter", "Nodes lost (no heartbeat).", out);
  MetricLine("gpusched_nodes_lost_total", "", double(s.nodes_lost), out);
  int64_t silent = 0;
  for (const core::NodeState& n : sched.cluster().nodes()) silent += !n.available && !n.lost;
  MetricHeader("gpusched_nodes_unreachable", "gauge",
               "Nodes silent past node_timeout, not yet lost (their tasks are kept).", out);
  MetricLine("gpusched_nodes_unreachable", "", double(silent), out);
  MetricHeader("gpusched_node_evictions_held", "gauge",
               "1 while more than half of the nodes fell silent within one node_timeout: "
               "no node is declared lost.", out);
  MetricLine("gpusched_node_evictions_held", "", sched.eviction_hold().empty() ? 0 : 1, out);
  MetricHeader("gpusched_tasks_reclaimed_total", "counter", "Tasks reclaimed (no heartbeat).",
               out);
  MetricLine("gpusched_tasks_reclaimed_total", "", double(s.tasks_reclaimed), out);
}

// The store's faults and commit times, and the passes' durations.
void ServerMetrics::CommitMetrics(const Sources& s, std::string& out) const {
  MetricHeader("gpusched_store_errors_total", "counter", "Failed store commits.", out);
  MetricLine("gpusched_store_errors_total", "", double(store_errors_), out);
  MetricHeader("gpusched_store_quarantined_rows", "gauge",
               "Stored rows that did not decode at start, moved to the quarantine table.", out);
  MetricLine("gpusched_store_quarantined_rows", "", double(quarantined_), out);
  MetricHeader("gpusched_store_commit_seconds", "histogram",
               "Duration of one group commit to the store.", out);
  commit_seconds_.Render("gpusched_store_commit_seconds", out);
  MetricHeader("gpusched_store_writable", "gauge",
               "1 while the store takes writes; 0 once its file was removed or replaced "
               "under the server (issue 39: restart it).", out);
  MetricLine("gpusched_store_writable", "", s.store_writable ? 1 : 0, out);
  MetricHeader("gpusched_decision_latency_seconds", "histogram",
               "Duration of one scheduling pass (all decisions of a snapshot of Q).", out);
  pass_seconds_.Render("gpusched_decision_latency_seconds", out);
}

// Each node's GPU memory and whether it is up.
void ServerMetrics::NodeMetrics(const core::Scheduler& sched, std::string& out) {
  MetricHeader("gpusched_node_gpu_memory_mib", "gauge",
               "GPU memory per node and GPU: total, allocated (reserved) and reported free.", out);
  for (const core::NodeState& n : sched.cluster().nodes()) {
    for (const core::GpuState& g : n.gpus) {
      const std::string l = "node=\"" + LabelValue(n.name) + "\",gpu=\"" +
                            std::to_string(g.index) + "\",kind=\"";
      MetricLine("gpusched_node_gpu_memory_mib", l + "total\"", double(g.total_mib), out);
      MetricLine("gpusched_node_gpu_memory_mib", l + "allocated\"", double(g.allocated_mib), out);
      if (g.reported_free_mib >= 0) {
        MetricLine("gpusched_node_gpu_memory_mib", l + "free\"", double(g.reported_free_mib), out);
      }
    }
  }
  MetricHeader("gpusched_node_up", "gauge", "1 if the node is reachable and available.", out);
  for (const core::NodeState& n : sched.cluster().nodes()) {
    MetricLine("gpusched_node_up", "node=\"" + LabelValue(n.name) + "\"",
               n.reachable && n.available ? 1 : 0, out);
  }
}

std::string ServerMetrics::Render(const Sources& s, bool with_teams) const {
  std::string out;
  TaskMetrics(s, out);
  SchedulingMetrics(s, out);
  if (with_teams) TeamMetrics(s.sched, out);
  MetricHeader("gpusched_quota_reclaims_total", "counter",
               "Tasks stopped so that a team gets its guaranteed GPUs back.", out);
  MetricLine("gpusched_quota_reclaims_total", "", double(s.sched.stats().reclaims), out);
  CommitMetrics(s, out);
  NodeMetrics(s.sched, out);
  return out;
}

}  // namespace gpusched::server
