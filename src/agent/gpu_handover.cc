#include "agent/gpu_handover.h"

#include <algorithm>

namespace gpusched::agent {

namespace v1 = ::gpusched::v1;

namespace {

bool IsTask(const v1::Assign& a, const TaskKey& task) {
  return a.id() == task.first && a.attempt() == task.second;
}

}  // namespace

bool GpuHandover::OnKill(const TaskKey& task) {
  const auto waiting = std::find_if(waiting_.begin(), waiting_.end(),
                                    [&](const v1::Assign& a) { return IsTask(a, task); });
  if (waiting != waiting_.end()) {
    waiting_.erase(waiting);
    return true;
  }
  if (!gpus_of_(task).empty()) stopping_.insert(task);
  return false;
}

std::optional<TaskKey> GpuHandover::Defer(const v1::Assign& a) {
  const std::optional<TaskKey> victim = StoppingOnGpusOf(a);
  if (!victim) return std::nullopt;
  const TaskKey task{a.id(), a.attempt()};
  const bool repeated = std::any_of(waiting_.begin(), waiting_.end(),
                                    [&](const v1::Assign& w) { return IsTask(w, task); });
  if (!repeated) waiting_.push_back(a);
  return victim;
}

std::vector<v1::Assign> GpuHandover::OnExit(const TaskKey& task) {
  stopping_.erase(task);
  std::vector<v1::Assign> ready;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (StoppingOnGpusOf(*it)) {
      ++it;
    } else {
      ready.push_back(std::move(*it));
      it = waiting_.erase(it);
    }
  }
  return ready;
}

std::vector<TaskKey> GpuHandover::Waiting() const {
  std::vector<TaskKey> out;
  out.reserve(waiting_.size());
  for (const v1::Assign& a : waiting_) out.emplace_back(a.id(), a.attempt());
  return out;
}

std::optional<TaskKey> GpuHandover::StoppingOnGpusOf(const v1::Assign& a) const {
  for (const TaskKey& key : stopping_) {
    for (int g : gpus_of_(key)) {
      if (std::find(a.gpus().begin(), a.gpus().end(), g) != a.gpus().end()) return key;
    }
  }
  return std::nullopt;
}

}  // namespace gpusched::agent
