// Scheduler: team quotas with borrowing and reclaim (core/quota.h) and fair share
// (core/fair_share.h) as the scheduler applies them; their books are TeamLedger and
// FairShareBook. The pass that uses them is Scheduler::Schedule (scheduler_plan.cc).

#include <algorithm>
#include <set>

#include "core/explain_need.h"
#include "core/scheduler.h"

namespace gpusched::core {

MiB Scheduler::TaskGpuMemMib(const Task& t) const {
  if (t.placement) {
    MiB sum = 0;
    for (MiB m : t.placement->gpu_mem_mib) sum += m;
    for (const Placement& g : t.gang_placements) {
      for (MiB m : g.gpu_mem_mib) sum += m;
    }
    return sum;
  }
  if (t.exclusive) return TotalGpus(t.spec) * ExtremesFor(t.spec.gpu_model).max_gpu_mib;
  return TotalGpus(t.spec) * t.gpu_mem_need_mib;
}

Status Scheduler::SetQuota(const TeamQuota& quota) {
  GS_RETURN_IF_ERROR(ledger_.SetQuota(quota));
  UnparkAll();  // quotas change the pass: the lazy flush no longer applies
  pass_requested_ = true;
  capacity_event_ = true;  // a quota change may let tasks waiting in FQ start (issue 37)
  fair_share_.MarkDirty();  // shares follow guarantees
  return Status::Ok();
}

void Scheduler::RemoveQuota(const std::string& team) {
  ledger_.RemoveQuota(team);
  UnparkAll();  // as SetQuota: the pass changes
  pass_requested_ = true;
  capacity_event_ = true;
  fair_share_.MarkDirty();
}

std::map<std::string, TeamStatus> Scheduler::Teams() const {
  std::map<std::string, int64_t> pending;
  for (const auto& [raw, t] : tasks_.records()) {
    if (IsPending(t.state) && !tasks_.IsHeld(t.id)) ++pending[TeamOf(t.spec)];
  }
  return ledger_.Teams(pending);
}

// ---------------------------------------------------------------- reclaim

void Scheduler::QuotaWait(Task& t, const std::string& reason) {
  if (t.reason != reason || t.last_report_summary != reason) {
    t.reason = reason;
    t.last_report_summary = reason;
    tasks_.MarkChanged(t.id);
  }
}

// ---------------------------------------------------------------- fair share

void Scheduler::RecalcFairShare() {
  fair_share_.Recalc();
  std::vector<QueueKey> keys = main_queue_.Snapshot();
  for (const QueueKey& k : keys) {
    Task& t = *Find(k.id);
    main_queue_.Erase(k);
    t.fs_rank = FairShareRank(config_.fair_share, t.pt, config_.max_priority_value,
                              fair_share_.CachedFactor(TeamOf(t.spec), t.spec.user));
    main_queue_.Push(KeyOf(t));
  }
}

}  // namespace gpusched::core
