// Issue 38, bounded history: finished tasks older than history_retention move from the store
// to the archive (store/task_archive.h), archive first, then commits that delete them, each
// with the rollup rows (server/rollups.h) that count them from then on.

#include <algorithm>
#include <span>
#include <utility>

#include "base/log.h"
#include "server/accounting.h"
#include "server/api_convert.h"
#include "server/control_plane.h"
#include "server/rollups.h"
#include "store/record_codec.h"

namespace gpusched::server {
namespace {

// Pages of the store one round reads at most before it yields (the cursor remembers where).
constexpr int kMaxScanPages = 16;
constexpr size_t kScanPage = 500;

// What a commit deleting `tasks` with `rows` costs at least (the records and their state
// entries; idempotency keys are not known here, so the store may still refuse it).
store::CommitCost ArchiveCost(size_t tasks, const std::vector<store::RollupRow>& rows,
                              const store::CommitLimits& limits) {
  store::CommitCost cost;
  for (size_t i = 0; i < tasks * (1 + limits.index_ops_per_put); ++i) cost.Delete(20, limits);
  for (const store::RollupRow& row : rows) {
    cost.PutUnindexed(row.team.size() + row.user.size() + row.failure.size() + 24,
                      store::EncodeRollup(row).size(), limits);
  }
  return cost;
}

}  // namespace

size_t ControlPlane::ArchiveBatch() const { return kArchiveBatch; }

// Issue 38: the rows are read as stored and written back whole in the commit that deletes
// the tasks they now count: both land or neither does, so each task is counted exactly once
// (this archiver is the rows' only writer; a deposed leader's commit is fenced).
StatusOr<store::WriteBatch> ControlPlane::ArchiveCommit(std::span<const store::TaskRecord> tasks,
                                                        std::span<const TaskUsage> usage) {
  store::WriteBatch batch;
  RollupSet rows(RollupDaysFor(store_->Limits().max_ops));
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (size_t i = 0; i < tasks.size(); ++i) {
    batch.deleted_tasks.push_back(tasks[i].task.id.value());
    const auto [from, to] = rows.DaysOf(usage[i]);
    if (from > to) continue;
    first = std::min(first, from);
    last = std::max(last, to);
  }
  if (first > last) return batch;  // nothing held: no rows
  GS_ASSIGN_OR_RETURN(std::vector<store::RollupRow> stored, store_->LoadRollups(first, last + 1));
  rows.Load(stored);
  for (const TaskUsage& u : usage) rows.Add(u);
  batch.rollups = rows.Changed();
  return batch;
}

// Deletes `tasks` from the store in commits that fit it, each with the rollup rows that
// count them: as many tasks as its limits allow at two operations a task (a record and its
// state entry; etcd), fewer when their rows would not fit, halved whenever the store refuses
// a commit as too large (a task with idempotency keys or parts needs more); a refusal writes
// nothing, so halving and retrying is safe. One task's rows always fit (RollupDaysFor).
Status ControlPlane::DeleteArchived(const std::vector<store::TaskRecord>& tasks) {
  const store::CommitLimits limits = store_->Limits();
  const GpuTotals totals = GpuTotalMib();
  std::vector<TaskUsage> usage;
  usage.reserve(tasks.size());
  for (const store::TaskRecord& r : tasks) {
    usage.push_back(UsageOf(TaskToProto(ViewOf(r), /*with_history=*/true), totals,
                            clock_.NowMs()));
  }
  size_t chunk = std::max<size_t>(1, limits.max_ops / 2);
  for (size_t at = 0; at < tasks.size();) {
    const size_t n = std::min(chunk, tasks.size() - at);
    GS_ASSIGN_OR_RETURN(store::WriteBatch batch,
                        ArchiveCommit(std::span(tasks).subspan(at, n),
                                      std::span(usage).subspan(at, n)));
    const bool fits = ArchiveCost(n, batch.rollups, limits).Within(limits);
    const Status s =
        fits ? store_->Commit(batch)
             : InvalidArgument("deleting " + std::to_string(n) + " archived tasks with " +
                               std::to_string(batch.rollups.size()) +
                               " rollup rows is above the store's commit limits");
    if (s.code() == StatusCode::kInvalidArgument && n > 1) {
      chunk = n / 2;
      continue;
    }
    GS_RETURN_IF_ERROR(s);
    at += n;
  }
  return Status::Ok();
}

void ControlPlane::SetArchive(std::unique_ptr<store::TaskArchive> archive) {
  archive_ = std::move(archive);
}

StatusOr<size_t> ControlPlane::ArchiveHistory() {
  if (archive_ == nullptr || config_.history_retention_ms <= 0) return size_t{0};
  const TimeMs cutoff = clock_.NowMs() - config_.history_retention_ms;  // records: wall time
  GS_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> old, FindOldHistory(cutoff));
  if (old.empty()) return size_t{0};
  // Archive before delete: a failure here deletes nothing; a crash between the two leaves
  // the task in both (the next round archives it again, which changes nothing).
  // Append marks them rolled up: from the commit that deletes them, acct counts them from
  // the rows it writes, and until then from the store.
  GS_RETURN_IF_ERROR(archive_->Append(old));
  GS_RETURN_IF_ERROR(DeleteArchived(old));
  {
    std::lock_guard<std::mutex> lock(mu_);  // gpusched_tasks counts what the store holds
    for (const store::TaskRecord& r : old) {
      index_.AddLeftFinished(core::TaskStateName(r.task.state), -1);
    }
  }
  logging::Info("server", "archived " + std::to_string(old.size()) +
                               " finished tasks older than " +
                               FormatDurationMs(config_.history_retention_ms));
  return old.size();
}

bool ControlPlane::ArchiveRound() {
  StatusOr<size_t> moved = size_t{0};
  for (int b = 0; b < kArchiveBatchesPerRound; ++b) {
    moved = ArchiveHistory();
    if (!moved.ok() || *moved < ArchiveBatch()) break;
  }
  if (!moved.ok()) {
    logging::Warn("server", "history_retention: " + moved.status().message() +
                                " (nothing deleted that is not archived; retried in " +
                                FormatDurationMs(kArchiveEvery) + ")");
  }
  return moved.ok() && *moved == ArchiveBatch();
}

void ControlPlane::ArchiverMain() {
  if (archive_ == nullptr || config_.history_retention_ms <= 0) return;
  // A short retention is kept to within a quarter of itself.
  const DurationMs every =
      std::clamp<DurationMs>(config_.history_retention_ms / 4, 1'000, kArchiveEvery);
  bool backlog = false;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(loop_mu_);
      clock_.WaitFor(lock, archive_cv_, backlog ? 0 : every, [&] { return stop_; });
      if (stop_) return;
    }
    backlog = ArchiveRound();
  }
}

StatusOr<std::vector<store::TaskRecord>> ControlPlane::FindOldHistory(TimeMs cutoff) {
  std::vector<store::TaskRecord> out;
  const size_t batch = ArchiveBatch();
  for (int pages = 0; pages < kMaxScanPages && out.size() < batch; ++pages) {
    GS_ASSIGN_OR_RETURN(store::TaskPage page,
                        store_->ListTasks(std::nullopt, history_cursor_, kScanPage));
    std::vector<store::TaskRecord> found;
    bool past = page.next_after_id == 0;
    for (store::TaskRecord& r : page.tasks) {
      // Ids grow with submission: a task submitted after the cutoff, and every later one,
      // finished after it.
      if (r.task.submitted_ms >= cutoff) {
        past = true;
        break;
      }
      history_cursor_ = r.task.id.value();
      const bool old = core::IsTerminal(r.task.state) && r.task.finished_ms > 0 &&
                       r.task.finished_ms < cutoff;
      if (old) found.push_back(std::move(r));
      if (out.size() + found.size() == batch) break;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);  // memory may still hold (and write) some
      for (store::TaskRecord& r : found) {
        if (sched_->GetTask(r.task.id) == nullptr) out.push_back(std::move(r));
      }
    }
    if (past && out.size() < batch) {
      history_cursor_ = 0;  // the next round starts again from the oldest stored task
      break;
    }
  }
  return out;
}

StatusOr<store::TaskRecord> ControlPlane::StoredOrArchived(uint64_t id) {
  StatusOr<store::TaskRecord> r = store_->GetTask(id);
  if (r.ok() || r.status().code() != StatusCode::kNotFound || archive_ == nullptr) return r;
  return archive_->Get(id);
}

StatusOr<TaskView> ControlPlane::GetArchivedTask(uint64_t id) {
  if (archive_ == nullptr) return NotFound("task " + std::to_string(id) + ": no such task");
  GS_ASSIGN_OR_RETURN(store::TaskRecord r, archive_->Get(id));
  return ViewOf(std::move(r));
}

StatusOr<ListPage> ControlPlane::ListArchived(TimeMs since_ms, uint64_t after_id, size_t limit) {
  ListPage out;
  if (archive_ == nullptr) return out;
  GS_ASSIGN_OR_RETURN(store::TaskPage page,
                      archive_->ListFinishedSince(since_ms, after_id, limit,
                                                  /*only_not_rolled_up=*/true));
  for (store::TaskRecord& r : page.tasks) out.tasks.push_back(ViewOf(std::move(r)));
  out.next_after_id = page.next_after_id;
  return out;
}

StatusOr<std::vector<store::RollupRow>> ControlPlane::ListRollups(TimeMs since_ms,
                                                                  TimeMs until_ms) {
  return store_->LoadRollups(RollupDayOf(since_ms), RollupDayOf(until_ms - 1) + 1);
}

}  // namespace gpusched::server
