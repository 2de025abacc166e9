#include "server/submission_waiters.h"

namespace gpusched::server {

std::vector<TaskId> SubmissionWaiters::ConsecutiveIds(TaskId first, size_t n) {
  std::vector<TaskId> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i) ids.push_back(TaskId(first.value() + i));
  return ids;
}

void SubmissionWaiters::Decide(SubmitManyDone done, Result result) {
  answers_.emplace_back(std::move(done), std::move(result));
}

void SubmissionWaiters::Await(TaskId first, SubmitManyDone done, size_t count) {
  awaiting_.emplace(first, Awaiting{std::move(done), count});
}

void SubmissionWaiters::Committed(TaskId first) {
  auto [from, to] = awaiting_.equal_range(first);  // a request's first id, its retries
  for (auto a = from; a != to; ++a) {
    answers_.emplace_back(std::move(a->second.done), ConsecutiveIds(first, a->second.count));
  }
  awaiting_.erase(from, to);
}

std::vector<TaskId> SubmissionWaiters::Failed(TaskId first, const Status& why) {
  std::vector<TaskId> ids;
  auto [from, to] = awaiting_.equal_range(first);
  for (auto a = from; a != to; ++a) {
    for (TaskId each : ConsecutiveIds(first, a->second.count)) ids.push_back(each);
    answers_.emplace_back(std::move(a->second.done), why);
  }
  awaiting_.erase(from, to);
  return ids;
}

std::vector<TaskId> SubmissionWaiters::AbandonAll(const Status& why) {
  std::vector<TaskId> ids;
  for (auto& [first, a] : awaiting_) {
    for (TaskId id : ConsecutiveIds(first, a.count)) ids.push_back(id);
    answers_.emplace_back(std::move(a.done), why);
  }
  awaiting_.clear();
  return ids;
}

}  // namespace gpusched::server
