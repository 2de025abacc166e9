// Scheduler: what a task waits for and why, as `gpusched why` shows it (Explain, issue 37's
// waits_for). Reads only: the task's record, the queues' next times and the state table.

#include <algorithm>

#include "core/explain_need.h"
#include "core/scheduler.h"

namespace gpusched::core {

StatusOr<Explanation> Scheduler::Explain(TaskId id) const {
  const Task* t = GetTask(id);
  if (t == nullptr) return NotFound("task " + id.ToString() + ": no such task");
  Explanation e;
  e.id = id;
  e.state = t->state;
  e.claim = t->claim;
  e.st = t->st;
  e.pt = t->pt;
  e.fail_cnt = t->fail_cnt;
  e.placement_failures = t->placement_failures;
  e.attempts = t->attempts;
  e.queue = t->queue == QueueMembership::kMain      ? "Q"
            : t->queue == QueueMembership::kFailure ? "FQ"
                                                    : "";
  e.last_report = t->last_report;
  e.pass = t->report_pass;
  e.pass_age_ms = t->report_pass > 0 ? std::max<DurationMs>(0, clock_.NowMs() - t->report_ms) : 0;
  switch (t->state) {
    case TaskState::kPending:
    case TaskState::kPreempted:
      e.summary = t->last_report_summary.empty() ? "waiting for the next scheduling pass"
                                                 : t->last_report_summary;
      e.waits_for = WaitsFor(*t);
      if (WaitsForCapacityInFq(*t)) {  // not an execution failure: the pass's reason only
        e.summary = e.waits_for + "; last pass: " + e.summary;
      } else if (t->fail_cnt > 0) {
        e.summary = t->reason + "; last pass: " + e.summary;
      }
      if (t->state == TaskState::kPreempted && t->preempted_by.valid()) {
        const Task* by = GetTask(t->preempted_by);
        e.summary = "preempted by task " + t->preempted_by.ToString() +
                    (by != nullptr ? " (priority " + std::to_string(by->priority) + ")" : "") +
                    ", waits to run again; last pass: " + e.summary;
      }
      e.need = DescribeNeed(cluster(), MakeRequest(*t).shape, resources_.placer().options().filter);
      break;
    case TaskState::kAssigned:
    case TaskState::kRunning:
      e.summary = t->last_report_summary;
      break;
    default:
      e.summary = t->reason;
  }
  return e;
}

std::string Scheduler::WaitsFor(const Task& t) const {
  const TimeMs now = clock_.NowMs();
  // Whole seconds, rounded up: "within 30s" right after a flush, never "within 0s".
  const auto within = [&](TimeMs at) {
    return FormatDurationMs((std::max<DurationMs>(1, at - now) + 999) / 1000 * 1000);
  };
  switch (t.queue) {
    case QueueMembership::kMain:
      return "waits in the queue: tried again by the next pass, within " + within(next_pass_ms_);
    case QueueMembership::kFailure:
      if (WaitsForCapacityInFq(t)) {
        return "waits for capacity: retried on the next release or within " +
               within(next_fq_flush_ms_);
      }
      return "waits in the retry queue after a failure: retried within " +
             within(next_fq_flush_ms_);
    case QueueMembership::kNone:
      break;
  }
  return "";
}

}  // namespace gpusched::core
