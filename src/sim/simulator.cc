#include "sim/simulator.h"

#include <algorithm>
#include <memory>
#include <set>
#include <unordered_map>

#include "base/clock.h"
#include "sim/cluster_spec.h"
#include "sim/event_queue.h"

namespace gpusched::sim {

core::TaskSpec MakeTaskSpec(const TraceJob& job, MiB smallest_gpu_mib, int64_t max_node_gpus) {
  core::TaskSpec spec;
  spec.name = job.id;
  spec.gpus = job.num_gpu;
  if (job.num_gpu > 0 && job.gpu_mem_mib > 0) {
    spec.gpu_mem_mib = job.gpu_mem_mib;
  } else if (job.num_gpu > 0 && job.gpu_milli < 1000) {
    spec.gpu_mem_mib = std::max<MiB>(1, job.gpu_milli * smallest_gpu_mib / 1000);
  }
  spec.resources = {job.cpu_milli, job.mem_mib};
  spec.team = job.cluster;
  spec.duration_ms = std::max<DurationMs>(1, job.duration_ms);  // the core needs >= 1 ms
  if (max_node_gpus > 0 && spec.gpus > max_node_gpus && spec.gpu_mem_mib == 0) {
    spec.nodes = (spec.gpus + max_node_gpus - 1) / max_node_gpus;
    spec.gpus = (spec.gpus + spec.nodes - 1) / spec.nodes;
    spec.resources.cpu_milli = (spec.resources.cpu_milli + spec.nodes - 1) / spec.nodes;
    spec.resources.mem_mib = (spec.resources.mem_mib + spec.nodes - 1) / spec.nodes;
  }
  return spec;
}

namespace {

class Run {
 public:
  Run(const Trace& trace, const SimOptions& options, core::Scheduler& sched, FakeClock& clock,
      const ClusterTotals& totals)
      : trace_(trace), options_(options), sched_(sched), clock_(clock), totals_(totals) {
    result_.jobs.resize(trace.jobs.size());
    tasks_.resize(trace.jobs.size());
    attempt_.assign(trace.jobs.size(), 0);
    for (size_t i = 0; i < trace.jobs.size(); ++i) {
      const TraceJob& j = trace.jobs[i];
      JobRecord& r = result_.jobs[i];
      r.id = j.id;
      r.num_gpu = j.num_gpu;
      r.gpu_share = static_cast<double>(j.num_gpu) * static_cast<double>(j.gpu_milli) / 1000.0;
      r.submit_ms = j.submit_ms;
      r.duration_ms = j.duration_ms;
      r.team = j.cluster;
    }
  }

  SimResult Replay();
  SimResult AllocationReplay();

 private:
  bool Submit(size_t i);
  void HandleEvent(const Event& e);
  void Redecide();
  void StartAssigned();
  void ScheduleLasThreshold(size_t i);
  void Sample();
  void Progress(size_t arrived);

  const Trace& trace_;
  const SimOptions& options_;
  core::Scheduler& sched_;
  FakeClock& clock_;
  const ClusterTotals totals_;
  SimResult result_;
  EventQueue events_;
  std::vector<TaskId> tasks_;          // by job index; invalid when rejected
  std::vector<int64_t> attempt_;       // current attempt of each job's task
  std::unordered_map<TaskId, size_t> job_of_;
  std::set<size_t> live_;              // submitted, not finished
  bool changed_ = false;               // the cluster's reservations changed this instant
  bool redecide_ = false;              // a preemptive policy must re-decide this instant
  TimeMs tick_at_ = -1;                // the pending Tick event, -1 = none
};

bool Run::Submit(size_t i) {
  core::TaskSpec spec = MakeTaskSpec(trace_.jobs[i], totals_.smallest_gpu_mib,
                                     options_.gangs ? totals_.max_node_gpus : 0);
  if (auto it = options_.vc_priority.find(trace_.jobs[i].cluster);
      it != options_.vc_priority.end()) {
    spec.priority_class = it->second;
  }
  auto id = sched_.Submit(std::move(spec));
  if (!id.ok()) {
    result_.jobs[i].outcome = JobOutcome::kRejected;
    result_.jobs[i].reason = id.status().message();
    return false;
  }
  tasks_[i] = *id;
  job_of_[*id] = i;
  live_.insert(i);
  redecide_ = true;
  changed_ = true;  // the queue grew: sample it
  return true;
}

void Run::HandleEvent(const Event& e) {
  switch (e.kind) {
    case EventKind::kFinish: {
      if (e.attempt != attempt_[e.job]) return;  // suspended since: stale
      const core::Task* t = sched_.GetTask(tasks_[e.job]);
      if (t == nullptr || t->state != core::TaskState::kRunning || t->attempts != e.attempt) return;
      (void)sched_.TaskFinished(tasks_[e.job], e.attempt, 0, 0);
      JobRecord& r = result_.jobs[e.job];
      r.finish_ms = e.at_ms;
      r.outcome = JobOutcome::kFinished;
      r.preemptions = t->preemptions;
      live_.erase(e.job);
      changed_ = redecide_ = true;
      return;
    }
    case EventKind::kLasThreshold:
      if (e.attempt == attempt_[e.job]) redecide_ = true;
      return;
    case EventKind::kTick:
      if (tick_at_ == e.at_ms) tick_at_ = -1;
      return;
  }
}

// core/preemption.h: suspend the running tasks the greedy walk in queue order leaves out.
void Run::Redecide() {
  const core::QueueOrderOptions& order = sched_.config().queue_order;
  for (TaskId id : sched_.PreemptForOrder()) {
    changed_ = true;
    const core::Task& t = *sched_.GetTask(id);
    if (auto due = core::PromotionDueMs(order, t)) {  // re-decide when it falls due
      events_.Push(*due, EventKind::kLasThreshold, job_of_.at(id), t.attempts);
    }
  }
}

void Run::ScheduleLasThreshold(size_t i) {
  const core::Task& t = *sched_.GetTask(tasks_[i]);
  const int64_t gpus = std::max<int64_t>(1, core::TotalGpus(t.spec));
  const int64_t attained = core::LasServiceGpuMs(t, t.attained_ms);
  for (int64_t th : core::LasThresholds(sched_.config().queue_order)) {
    if (th <= attained) continue;
    const DurationMs run_ms = (th - attained + gpus - 1) / gpus;
    events_.Push(clock_.NowMs() + run_ms, EventKind::kLasThreshold, i, t.attempts);
    return;
  }
}

void Run::StartAssigned() {
  for (const core::Action& a : sched_.TakeActions()) {
    // Kills: the task is already released. A gang starts once, at its rank 0's action.
    if (a.kind != core::Action::Kind::kAssign || a.rank != 0) continue;
    const size_t i = job_of_.at(a.task);
    (void)sched_.TaskStarted(a.task, a.attempt);
    attempt_[i] = a.attempt;
    changed_ = true;
    JobRecord& r = result_.jobs[i];
    if (r.start_ms < 0) r.start_ms = clock_.NowMs();
    const core::Task& t = *sched_.GetTask(a.task);
    const DurationMs left = std::max<DurationMs>(0, trace_.jobs[i].duration_ms - t.attained_ms);
    events_.Push(clock_.NowMs() + left, EventKind::kFinish, i, a.attempt);
    const core::QueueOrderOptions& order = sched_.config().queue_order;
    if (order.order == core::QueueOrder::kLeastAttained ||
        order.order == core::QueueOrder::kTwoDimLas) {
      ScheduleLasThreshold(i);
    }
    if (core::IsPreemptiveOrder(order.order) && order.quantum_ms > 0) {
      events_.Push(clock_.NowMs() + order.quantum_ms, EventKind::kLasThreshold, i, a.attempt);
    }
  }
  (void)sched_.TakeChangedTasks();  // the simulator keeps no store
}

void Run::Sample() {
  UsageSample s;
  s.at_ms = clock_.NowMs();
  const core::ClusterState& cluster = sched_.cluster();
  for (size_t i = 0; i < cluster.size(); ++i) {
    const core::NodeSummary& n = cluster.summary(i);
    const int64_t free_gpus = n.whole_free_gpus, busy = n.gpu_count - free_gpus;
    s.busy_gpus += busy;
    s.reserved_gpu_mib += n.gpu_alloc_mib;
    if (busy == 0) continue;
    s.fragmented_free_gpus += free_gpus;
    // Free memory on busy GPUs = all free memory minus that of the wholly free GPUs.
    MiB free_on_idle = 0;
    if (n.gpu_total_mib == n.gpu_count * n.max_gpu_total_mib) {  // GPUs of one size
      free_on_idle = free_gpus * n.max_gpu_total_mib;
    } else {
      for (const core::GpuState& g : cluster.node(i).gpus) {
        if (g.tasks == 0 && g.allocated_mib == 0) free_on_idle += g.total_mib;
      }
    }
    s.fragmented_free_mib += n.gpu_total_mib - n.gpu_alloc_mib - free_on_idle;
  }
  s.queued = static_cast<int64_t>(sched_.main_queue_size() + sched_.failure_queue_size());
  if (!result_.usage.empty() && result_.usage.back().at_ms == s.at_ms) {
    result_.usage.back() = s;
  } else {
    result_.usage.push_back(s);
  }
}

void Run::Progress(size_t arrived) {
  if (options_.progress && (arrived % 1024 == 0 || arrived == trace_.jobs.size())) {
    options_.progress(arrived, trace_.jobs.size());
  }
}

SimResult Run::Replay() {
  const bool preemptive = core::IsPreemptiveOrder(sched_.config().queue_order.order);
  size_t next_arrival = 0;
  const size_t n = trace_.jobs.size();
  Sample();  // the empty cluster from the first submission on
  while (next_arrival < n || !events_.empty()) {
    // Arrivals hold the lowest sequence numbers, so at equal times they come first.
    TimeMs now = events_.empty() ? trace_.jobs[next_arrival].submit_ms : events_.top().at_ms;
    if (next_arrival < n) now = std::min(now, trace_.jobs[next_arrival].submit_ms);
    clock_.SetMs(now);
    while (next_arrival < n && trace_.jobs[next_arrival].submit_ms == now) {
      Submit(next_arrival++);
      Progress(next_arrival);
    }
    while (!events_.empty() && events_.top().at_ms == now) {
      HandleEvent(events_.Pop());
      ++result_.events;
    }
    if (preemptive && redecide_) Redecide();
    redecide_ = false;
    sched_.Tick();
    StartAssigned();
    if (sched_.failure_queue_size() > 0 && tick_at_ < 0) {
      tick_at_ = std::max(now + 1, sched_.next_failure_flush_ms());
      events_.Push(tick_at_, EventKind::kTick);
    }
    if (changed_) Sample();
    changed_ = false;
  }
  result_.events += static_cast<int64_t>(n);
  return std::move(result_);
}

SimResult Run::AllocationReplay() {
  AllocationResult& a = result_.allocation;
  a.total_gpus = static_cast<double>(totals_.gpus);
  for (size_t i = 0; i < trace_.jobs.size(); ++i) {
    clock_.SetMs(std::max(clock_.NowMs(), trace_.jobs[i].submit_ms));
    JobRecord& r = result_.jobs[i];
    a.arrived_gpus += r.gpu_share;
    if (Submit(i)) {
      sched_.Schedule();
      const core::Task& t = *sched_.GetTask(tasks_[i]);
      if (t.placement) {
        r.start_ms = clock_.NowMs();
        r.outcome = JobOutcome::kAllocated;
        a.allocated_gpus += r.gpu_share;
      } else {
        r.outcome = JobOutcome::kUnallocated;
        r.reason = t.last_report_summary;
        (void)sched_.Cancel(tasks_[i], "allocation replay: no node fits on arrival");
      }
      (void)sched_.TakeActions();
      (void)sched_.TakeChangedTasks();
    }
    a.curve.push_back({a.arrived_gpus, a.allocated_gpus});
    Sample();
    Progress(i + 1);
  }
  a.allocation_rate = a.total_gpus > 0 ? a.allocated_gpus / a.total_gpus : 0;
  a.unallocated_gpus = a.arrived_gpus - a.allocated_gpus;
  result_.events = static_cast<int64_t>(trace_.jobs.size());
  return std::move(result_);
}

}  // namespace

StatusOr<SimResult> RunSimulation(const Trace& trace, const std::vector<core::NodeSpec>& nodes,
                                  const SimOptions& options) {
  if (nodes.empty()) return InvalidArgument("cluster: no nodes");
  const TimeMs start = trace.jobs.empty() ? 0 : trace.jobs.front().submit_ms;
  FakeClock clock(start);
  core::SchedulerConfig config =
      MakeSchedulerConfig(options.policy, options.placement, options.las_thresholds_gpu_ms,
                          options.promote_knob);
  config.gang_reservation = options.gang_reservation;
  if (options.config) {  // the server's keys; liveness off as for every policy
    const core::SchedulerConfig policy = config;
    config = *options.config;
    config.node_timeout_ms = policy.node_timeout_ms;
    config.task_timeout_ms = policy.task_timeout_ms;
    config.node_lost_after_ms = policy.node_lost_after_ms;
  }
  // The stated durations are the true ones: jobs backfill by them, as before issue 37.
  config.backfill_by_expected_duration = true;
  // `--config` runs what the server would (its wide_task_reservation key, on by default);
  // `--policy` runs keep the pinned figures unless --wide-reservation.
  if (!options.config) {
    config.wide_task_reservation = config.wide_task_reservation && options.wide_task_reservation;
  }
  GS_ASSIGN_OR_RETURN(std::unique_ptr<core::Scheduler> sched,
                      core::Scheduler::Create(std::move(config), clock));
  for (const core::NodeSpec& n : nodes) GS_RETURN_IF_ERROR(sched->RegisterNode(n));
  for (const core::TeamQuota& q : options.quotas) GS_RETURN_IF_ERROR(sched->SetQuota(q));
  const ClusterTotals totals = Totals(nodes);
  Run run(trace, options, *sched, clock, totals);
  SimResult result = options.allocation_replay ? run.AllocationReplay() : run.Replay();
  result.stats = sched->stats();
  result.total_gpus = totals.gpus;
  result.total_gpu_mib = totals.gpu_mib;
  result.summary = Summarize(result.jobs, result.usage, totals.gpus, totals.gpu_mib);
  return result;
}

}  // namespace gpusched::sim
