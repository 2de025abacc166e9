#pragma once
// ServerMetrics (issue 40: out of ControlPlane): the control plane's own counters and
// histograms, and the Prometheus page (GET /metrics, http_routes.cc) written from them and
// from what the scheduler, the task index and the store say. The families come in a fixed
// order (tasks, scheduling, teams, quota reclaims, commits, nodes); `with_teams` false
// leaves out the per-team series (their label names teams; `metrics_teams: false`).
//
// Thread-safety: none of its own (the histograms lock themselves). ControlPlane calls it
// under its lock (ControlPlane::mu_), which also guards what Render reads.

#include <cstdint>
#include <string>

#include "core/scheduler.h"
#include "server/metrics.h"
#include "server/task_index.h"

namespace gpusched::server {

class ServerMetrics {
 public:
  // What the page reads besides the counters here.
  struct Sources {
    const core::Scheduler& sched;
    const TaskIndex& index;
    size_t filter_workers = 1;  // threads lent to the parallel node filter (1 = none)
    bool store_writable = true;
  };

  void AddSubmitted(int64_t n) { submitted_ += n; }
  void AddStoreError() { ++store_errors_; }
  void SetQuarantined(int64_t rows) { quarantined_ = rows; }
  // One scheduling pass that decided something, and one group commit, in seconds.
  void ObservePass(double seconds) { pass_seconds_.Observe(seconds); }
  void ObserveCommit(double seconds) { commit_seconds_.Observe(seconds); }

  std::string Render(const Sources& s, bool with_teams) const;

 private:
  void TaskMetrics(const Sources& s, std::string& out) const;
  static void SchedulingMetrics(const Sources& s, std::string& out);
  static void TeamMetrics(const core::Scheduler& sched, std::string& out);
  void CommitMetrics(const Sources& s, std::string& out) const;
  static void NodeMetrics(const core::Scheduler& sched, std::string& out);

  int64_t store_errors_ = 0;
  int64_t submitted_ = 0;
  int64_t quarantined_ = 0;
  // Up to 10 s: a pass over a million queued tasks takes more than a second (issue 43), and
  // a p99 in the last finite bucket says only "at least 1 s".
  Histogram pass_seconds_{{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                           0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
  Histogram commit_seconds_{{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                             0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
};

}  // namespace gpusched::server
