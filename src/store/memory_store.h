#pragma once
// MemoryStore: a StateStore in process memory, for `gpusched server` without a data directory,
// tests and benchmarks that do not measure persistence. Nothing survives the process; a
// Commit is atomic with respect to readers. Thread-safe.

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "store/state_store.h"

namespace gpusched::store {

class MemoryStore final : public StateStore {
 public:
  MemoryStore();
  // Issue 39: a new id for each MemoryStore (one per server process): nothing survives.
  const std::string& ClusterId() const override { return cluster_id_; }
  Status Commit(const WriteBatch& batch) override;
  Status SnapshotTo(const std::string&) override {
    return FailedPrecondition(
        "the server keeps its state in memory (no --data-dir): there is nothing to back up");
  }
  StatusOr<LiveTasks> LoadLiveTasks() override;
  StatusOr<TaskRecord> GetTask(uint64_t id) override;
  StatusOr<TaskPage> ListTasks(std::optional<std::string> state, uint64_t after_id,
                               size_t limit) override;
  StatusOr<std::map<std::string, int64_t>> CountTasksByState() override;
  StatusOr<std::optional<uint64_t>> LookupIdempotencyKey(const std::string& key) override;
  StatusOr<std::vector<NodeRecord>> LoadNodes() override;
  StatusOr<std::vector<LearnedPeak>> LoadLearnedPeaks() override;
  StatusOr<std::vector<TokenRecord>> LoadTokens() override;
  StatusOr<std::vector<core::TeamQuota>> LoadQuotas() override;
  StatusOr<std::vector<QuarantinedRow>> LoadQuarantine() override;
  StatusOr<std::vector<RollupRow>> LoadRollups(int64_t from_day, int64_t to_day) override;

 private:
  std::string cluster_id_;
  std::mutex mu_;
  std::map<uint64_t, TaskRecord> tasks_;
  uint64_t max_id_ = 0;  // the largest id ever stored
  std::map<std::string, NodeRecord> nodes_;
  std::map<std::string, uint64_t> keys_;
  std::map<core::MemoryProfile, LearnedPeak> peaks_;
  std::map<std::string, TokenRecord> tokens_;
  std::map<std::string, core::TeamQuota> quotas_;
  // Issue 38: by (day, team, user, failure), in LoadRollups' order.
  std::map<std::tuple<int64_t, std::string, std::string, std::string>, RollupRow> rollups_;
};

}  // namespace gpusched::store
