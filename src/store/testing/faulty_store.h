#pragma once
// FaultyStore: a StateStore that wraps another and fails or stalls its commits on command,
// for control-plane tests (fail the next N commits, fail until healed, hold a commit in
// flight to see what groups behind it). Reads pass through.
//
// Thread-safety: every method is safe from any thread.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "store/state_store.h"

namespace gpusched::store::testing {

class FaultyStore final : public StateStore {
 public:
  explicit FaultyStore(std::unique_ptr<StateStore> inner) : inner_(std::move(inner)) {}

  // The next `n` commits fail with Internal and write nothing.
  void FailNextCommits(int n);
  // Every commit fails while `on`.
  void FailAllCommits(bool on);
  // While held, Commit blocks (after counting the call) until Release.
  void HoldCommits();
  void ReleaseCommits();
  // LoadLiveTasks calls `during` before it reads (a reload that takes long: the test
  // advances its fake clock there).
  void DuringLoadLiveTasks(std::function<void()> during);
  // Blocks until `n` commits are waiting in HoldCommits, or returns false after ~5 s.
  bool WaitForHeld(int n);
  int64_t commits() const;         // successful ones
  int64_t failed_commits() const;
  // The task ids of every successful commit, in order.
  std::vector<std::vector<uint64_t>> committed_tasks() const;

  Status Commit(const WriteBatch& batch) override;
  CommitLimits Limits() const override { return inner_->Limits(); }
  StatusOr<LiveTasks> LoadLiveTasks() override;
  StatusOr<TaskRecord> GetTask(uint64_t id) override { return inner_->GetTask(id); }
  StatusOr<TaskPage> ListTasks(std::optional<std::string> state, uint64_t after_id,
                               size_t limit) override {
    return inner_->ListTasks(std::move(state), after_id, limit);
  }
  StatusOr<std::map<std::string, int64_t>> CountTasksByState() override {
    return inner_->CountTasksByState();
  }
  StatusOr<std::optional<uint64_t>> LookupIdempotencyKey(const std::string& key) override {
    return inner_->LookupIdempotencyKey(key);
  }
  StatusOr<std::vector<NodeRecord>> LoadNodes() override { return inner_->LoadNodes(); }
  StatusOr<std::vector<LearnedPeak>> LoadLearnedPeaks() override {
    return inner_->LoadLearnedPeaks();
  }
  StatusOr<std::vector<TokenRecord>> LoadTokens() override { return inner_->LoadTokens(); }
  StatusOr<std::vector<core::TeamQuota>> LoadQuotas() override { return inner_->LoadQuotas(); }
  StatusOr<std::vector<QuarantinedRow>> LoadQuarantine() override {
    return inner_->LoadQuarantine();
  }
  StatusOr<std::vector<RollupRow>> LoadRollups(int64_t from_day, int64_t to_day) override {
    return inner_->LoadRollups(from_day, to_day);
  }
  const std::string& ClusterId() const override { return inner_->ClusterId(); }

 private:
  std::unique_ptr<StateStore> inner_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int fail_next_ = 0;
  bool fail_all_ = false;
  bool hold_ = false;
  int held_ = 0;
  int64_t commits_ = 0;
  int64_t failed_ = 0;
  std::vector<std::vector<uint64_t>> log_;
  std::function<void()> during_load_;
};

}  // namespace gpusched::store::testing
