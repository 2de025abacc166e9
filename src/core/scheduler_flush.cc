// Scheduler: the FQ flush (CN115981827A claims 3, 8) and its lazy form (README.md, "The
// failure queue at scale"). Eagerly, every t2 each FQ task is demoted, returned to Q and
// re-tried by the pass that follows, one by one. On a cluster that stays full FQ holds
// thousands of tasks, almost all at the demotion cap and of a few request shapes, and each
// flush re-tried every one of them. The lazy flush parks those tasks by shape (ParkedQueue):
// the flush pass tries a shape's tasks in Q order only while they are placed; once one does
// not fit, the pass's failed-shape memo would fail all the others (capacity only shrinks
// during a pass), so they wait at once, unvisited. Their placement_failures, last report and
// reason are caught up when a task is read, to what the eager flush would have written.

#include <algorithm>
#include <limits>

#include "core/scheduler.h"

namespace gpusched::core {

void Scheduler::FlushFailureQueue() {
  // CN115981827A claims 3, 8: every t2, each FQ task is demoted (Pt + 1, capped) and returns
  // to Q, keeping its first-submission order inside the band.
  const std::vector<TaskId> drained = failure_queue_.Drain();
  for (TaskId id : drained) {
    Task& t = *Find(id);
    t.queue = QueueMembership::kNone;
    t.pt = std::min(t.pt + 1, config_.max_priority_value);
    tasks_.MarkChanged(id);
    PushMain(t);
  }
  fq_capacity_.clear();  // all back in Q
  // Parked tasks are at the cap already: the demotion leaves them as they are, and they take
  // part in the pass that follows (PlanWithParked).
  if (LazyFlushActive() && (!drained.empty() || !parked_.empty())) {
    flush_pass_due_ = true;
    pass_requested_ = true;
  }
}

bool Scheduler::LazyFlushActive() const {
  return config_.lazy_failure_queue && config_.capacity_wait == CapacityWait::kFailureQueue &&
         config_.memoize_failed_shapes && !config_.head_of_line_blocking &&
         config_.queue_order.order == QueueOrder::kPriority && !FairShareActive() &&
         ledger_.quotas().empty() && !config_.wide_task_reservation &&
         config_.max_placement_failures == std::numeric_limits<int64_t>::max();
}

Scheduler::Shape Scheduler::ShapeOf(const ResourceRequest& req) const {
  const PlacementRequest& r = req.shape;
  return Shape{r.gpus, r.gpu_mem_mib, r.exclusive, r.model_id, r.resources.cpu_milli,
               r.resources.mem_mib, req.nodes};
}

void Scheduler::MaybePark(Task& t) {
  if (t.queue != QueueMembership::kFailure || !LazyFlushActive()) return;
  // The reservation holder stays in plain FQ, so each flush tries it (a parked gang is tried
  // only as its group's head).
  if (reservation_ && reservation_->task == t.id) return;
  // Only a key the next flush does not change (Pt at the cap), and only the tasks whose shape
  // the memo covers (no node rules) and stays the same (a known GPU model, if any).
  if (std::min(t.pt + 1, config_.max_priority_value) != t.pt) return;
  if (!t.spec.node_selector.empty() || !t.spec.tolerations.empty()) return;
  // A time limit may let a task backfill onto reserved GPUs where others of its shape may
  // not (core/backfill.h): the group's first failure would not stand for it.
  if (t.spec.time_limit_ms) return;
  const ResourceRequest req = MakeRequest(t);
  if (req.shape.model_id == kUnknownModel) return;
  failure_queue_.Erase(t.id);
  fq_capacity_.erase(t.id);  // a parked task waits for capacity by definition
  parked_.Park(ShapeOf(req), KeyOf(t), flush_rounds_ + 1, t.last_report, t.last_report_summary,
               t.report_pass, t.report_ms);
}

void Scheduler::ApplyParkedWait(PlanStep& step) {
  ParkedQueue::Group& g = parked_.GroupOf(*parked_.Find(step.task));
  // Each of them waits for this reason now: a new reason is a change worth writing.
  if (g.summary != step.reason) {
    for (const QueueKey& k : g.keys) tasks_.MarkChanged(k.id);
  }
  // A flush pass also counts a placement failure for each (flush_rounds_, CatchUp); a pass
  // that a release triggered only refreshes the reason (issue 37).
  parked_.SetReport(g, std::move(step.report), std::move(step.reason), stats_.passes,
                    clock_.NowMs());
}

void Scheduler::CatchUp(TaskId id) const {
  ParkedQueue::Entry* e = parked_.Find(id);
  if (e == nullptr) return;
  const ParkedQueue::Group& g = parked_.GroupOf(*e);
  if (e->round >= flush_rounds_ && g.report_seq <= e->report_seq) return;
  // The record is the scheduler's own; only the lazy flush's pending counters are applied.
  Task& t = const_cast<Task&>(tasks_.At(id));
  t.placement_failures += std::max<int64_t>(0, flush_rounds_ - e->round);
  if (g.report_seq > e->report_seq) {
    t.last_report = g.report;
    t.last_report_summary = g.summary;
    t.reason = g.summary;
    t.report_pass = g.report_pass;
    t.report_ms = g.report_ms;
    e->report_seq = g.report_seq;
  }
  e->round = std::max(e->round, flush_rounds_);
}

void Scheduler::CatchUpAll() const {
  for (const auto& [id, e] : parked_.entries()) CatchUp(id);
}

void Scheduler::UnparkAll() {
  if (parked_.empty()) return;
  const std::vector<TaskId> order = FailureQueueOrder();
  CatchUpAll();
  for (const auto& [id, e] : parked_.entries()) fq_capacity_.insert(id);  // still waiting
  parked_.Clear();
  failure_queue_.Drain();
  for (TaskId id : order) failure_queue_.Push(id);
  flush_pass_due_ = false;
}

std::vector<TaskId> Scheduler::FailureQueueOrder() const {
  if (parked_.empty()) return failure_queue_.Snapshot();
  // Parked tasks failed in the latest flush pass, with the tasks FQ holds from it, all in the
  // pass's order (Q order); the tasks that failed since follow, in failure order.
  std::vector<QueueKey> flush_pass;
  std::vector<TaskId> since;
  for (const auto& [position, id] : failure_queue_.Entries()) {
    if (position < flush_block_end_) {
      flush_pass.push_back(KeyOf(tasks_.At(id)));
    } else {
      since.push_back(id);
    }
  }
  for (const auto& [id, e] : parked_.entries()) flush_pass.push_back(e.key);
  std::sort(flush_pass.begin(), flush_pass.end());
  std::vector<TaskId> out;
  out.reserve(flush_pass.size() + since.size());
  for (const QueueKey& k : flush_pass) out.push_back(k.id);
  out.insert(out.end(), since.begin(), since.end());
  return out;
}

}  // namespace gpusched::core
