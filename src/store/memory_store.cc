#include "store/memory_store.h"

#include <algorithm>
#include <set>

#include "base/check.h"
#include "base/cluster_id.h"

namespace gpusched::store {

MemoryStore::MemoryStore() {
  // getrandom(2) fails only without a kernel that has it (Linux < 3.17): not a supported host.
  StatusOr<std::string> id = NewClusterId();
  GS_CHECK(id.ok());
  cluster_id_ = std::move(id).value();
}

Status MemoryStore::Commit(const WriteBatch& batch) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const TaskRecord& r : batch.tasks) {
    tasks_[r.task.id.value()] = r;
    max_id_ = std::max(max_id_, r.task.id.value());
  }
  for (uint64_t id : batch.deleted_tasks) tasks_.erase(id);
  if (!batch.deleted_tasks.empty()) {
    const std::set<uint64_t> gone(batch.deleted_tasks.begin(), batch.deleted_tasks.end());
    std::erase_if(keys_, [&gone](const auto& key_id) { return gone.count(key_id.second) != 0; });
  }
  for (const NodeRecord& n : batch.nodes) nodes_[n.spec.name] = n;
  for (const std::string& name : batch.removed_nodes) nodes_.erase(name);
  for (const auto& [key, id] : batch.idempotency_keys) keys_.emplace(key, id);
  for (const LearnedPeak& p : batch.peaks) peaks_[p.profile] = p;
  for (const core::MemoryProfile& p : batch.forgotten_peaks) peaks_.erase(p);
  for (const TokenRecord& t : batch.tokens) tokens_[t.id] = t;
  for (const std::string& id : batch.revoked_tokens) tokens_.erase(id);
  for (const core::TeamQuota& q : batch.quotas) quotas_[q.team] = q;
  for (const std::string& team : batch.removed_quotas) quotas_.erase(team);
  for (const RollupRow& row : batch.rollups) rollups_[row.Key()] = row;
  return Status::Ok();
}

StatusOr<std::vector<core::TeamQuota>> MemoryStore::LoadQuotas() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<core::TeamQuota> out;
  for (const auto& [team, q] : quotas_) out.push_back(q);
  return out;
}

StatusOr<LiveTasks> MemoryStore::LoadLiveTasks() {
  std::lock_guard<std::mutex> lock(mu_);
  LiveTasks out;
  out.max_id = max_id_;  // deleted (archived) tasks' ids included
  for (const auto& [id, r] : tasks_) {
    if (!core::IsTerminal(r.task.state)) out.tasks.push_back(r);
  }
  return out;
}

StatusOr<TaskRecord> MemoryStore::GetTask(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return NotFound("task " + std::to_string(id) + ": no such task");
  return it->second;
}

StatusOr<TaskPage> MemoryStore::ListTasks(std::optional<std::string> state, uint64_t after_id,
                                          size_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  TaskPage page;
  for (auto it = tasks_.upper_bound(after_id); it != tasks_.end(); ++it) {
    if (state && *state != core::TaskStateName(it->second.task.state)) continue;
    if (page.tasks.size() == limit) {
      page.next_after_id = page.tasks.back().task.id.value();
      break;
    }
    page.tasks.push_back(it->second);
  }
  return page;
}

StatusOr<std::map<std::string, int64_t>> MemoryStore::CountTasksByState() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int64_t> out;
  for (const auto& [id, r] : tasks_) ++out[core::TaskStateName(r.task.state)];
  return out;
}

StatusOr<std::optional<uint64_t>> MemoryStore::LookupIdempotencyKey(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = keys_.find(key);
  return it == keys_.end() ? std::optional<uint64_t>() : std::optional<uint64_t>(it->second);
}

StatusOr<std::vector<NodeRecord>> MemoryStore::LoadNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeRecord> out;
  for (const auto& [name, n] : nodes_) out.push_back(n);
  return out;
}

StatusOr<std::vector<LearnedPeak>> MemoryStore::LoadLearnedPeaks() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LearnedPeak> out;
  for (const auto& [profile, p] : peaks_) out.push_back(p);
  return out;
}

StatusOr<std::vector<TokenRecord>> MemoryStore::LoadTokens() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TokenRecord> out;
  for (const auto& [id, t] : tokens_) out.push_back(t);
  return out;
}

StatusOr<std::vector<RollupRow>> MemoryStore::LoadRollups(int64_t from_day, int64_t to_day) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RollupRow> out;
  for (auto it = rollups_.lower_bound({from_day, "", "", ""});
       it != rollups_.end() && it->second.day < to_day; ++it) {
    out.push_back(it->second);
  }
  return out;
}

StatusOr<std::vector<QuarantinedRow>> MemoryStore::LoadQuarantine() {
  return std::vector<QuarantinedRow>();
}

}  // namespace gpusched::store
