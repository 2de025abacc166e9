#include "store/testing/faulty_store.h"

#include <chrono>

namespace gpusched::store::testing {

void FaultyStore::DuringLoadLiveTasks(std::function<void()> during) {
  std::lock_guard<std::mutex> lock(mu_);
  during_load_ = std::move(during);
}

StatusOr<LiveTasks> FaultyStore::LoadLiveTasks() {
  std::function<void()> during;
  {
    std::lock_guard<std::mutex> lock(mu_);
    during = during_load_;
  }
  if (during) during();
  return inner_->LoadLiveTasks();
}

void FaultyStore::FailNextCommits(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_next_ = n;
}

void FaultyStore::FailAllCommits(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_all_ = on;
}

void FaultyStore::HoldCommits() {
  std::lock_guard<std::mutex> lock(mu_);
  hold_ = true;
}

void FaultyStore::ReleaseCommits() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = false;
  }
  cv_.notify_all();
}

bool FaultyStore::WaitForHeld(int n) {
  std::unique_lock<std::mutex> lock(mu_);
  // Real time: this waits for another thread to arrive, not for the system under test's
  // clock (the control plane never waits on it here).
  return cv_.wait_for(lock, std::chrono::seconds(5), [&] { return held_ >= n; });
}

int64_t FaultyStore::commits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return commits_;
}

int64_t FaultyStore::failed_commits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

std::vector<std::vector<uint64_t>> FaultyStore::committed_tasks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

Status FaultyStore::Commit(const WriteBatch& batch) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    ++held_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !hold_; });
    --held_;
    if (fail_all_ || fail_next_ > 0) {
      if (fail_next_ > 0) --fail_next_;
      ++failed_;
      return Internal("store: injected commit failure");
    }
  }
  GS_RETURN_IF_ERROR(inner_->Commit(batch));
  std::lock_guard<std::mutex> lock(mu_);
  ++commits_;
  std::vector<uint64_t> ids;
  for (const TaskRecord& r : batch.tasks) ids.push_back(r.task.id.value());
  log_.push_back(std::move(ids));
  return Status::Ok();
}

}  // namespace gpusched::store::testing
