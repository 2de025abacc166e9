#include "agent/cluster_membership.h"

#include <algorithm>

#include "base/cluster_id.h"

namespace gpusched::agent {

ClusterMembership::ClusterMembership(Host& host, Clock& clock, std::string recorded,
                                     std::string archive_dir)
    : host_(host), clock_(clock), archive_dir_(std::move(archive_dir)), id_(std::move(recorded)) {}

std::string ClusterMembership::id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return id_;
}

ClusterMembership::Change ClusterMembership::Note(const std::string& id) {
  if (id.empty()) return Change::kNone;  // a server older than cluster ids: files stay
  if (Status valid = ValidateClusterId(id, "Registered.cluster_id"); !valid.ok()) {
    Log(valid.message() + "; the task files here stay as they are", logging::Level::kWarn);
    return Change::kNone;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (id == id_ && joining_.empty()) return Change::kNone;
  joining_ = id;
  return !id_.empty() && id != id_ ? Change::kLeave : Change::kJoin;
}

void ClusterMembership::MarkOld(const std::vector<TaskKey>& tasks,
                                const std::vector<TaskKey>& exits) {
  std::lock_guard<std::mutex> lock(mu_);
  old_.insert(tasks.begin(), tasks.end());
  dropped_exits_.insert(dropped_exits_.end(), exits.begin(), exits.end());
}

void ClusterMembership::Join(const std::string& id, DurationMs kill_grace_ms) {
  const std::string old = this->id();
  if (!old.empty() && old != id && !Leave(old, id, kill_grace_ms)) return;
  if (Status s = host_.Record(id); !s.ok()) {
    // Kept in memory: this agent goes on; the next one, restarted on this data dir, finds
    // the old id and moves the (new cluster's) files aside once more.
    Log("cannot record the cluster id: " + s.message(), logging::Level::kError);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    id_ = id;
    if (joining_ == id) joining_.clear();
  }
  if (old != id) Log("the task files of this node belong to cluster " + id);
}

bool ClusterMembership::Leave(const std::string& old_id, const std::string& id,
                              DurationMs kill_grace_ms) {
  const std::string reason = "this node joined cluster " + id + " (a server with a new store): "
                             "the tasks of cluster " + old_id + " are not that cluster's";
  const std::vector<TaskKey> old_tasks = host_.Running();
  {
    std::lock_guard<std::mutex> lock(mu_);
    old_.insert(old_tasks.begin(), old_tasks.end());
  }
  Log("leaving cluster " + old_id + ": stopping its " + std::to_string(old_tasks.size()) +
      " tasks; " + reason, logging::Level::kWarn);
  for (const TaskKey& task : old_tasks) host_.Kill(task, kill_grace_ms, reason);
  if (!WaitForExits(old_tasks, kill_grace_ms + 5'000)) {
    if (host_.Stopping()) return false;
    // Their exits are acknowledged when they come (DropOldExit).
    Log("tasks of cluster " + old_id + " still run after their stop; moving their files now",
        logging::Level::kWarn);
  }
  StatusOr<int> moved = host_.ArchiveTaskFiles(old_id);
  std::vector<TaskKey> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(dropped_exits_);
  }
  for (const TaskKey& task : dropped) host_.Acknowledge(task);
  if (!moved.ok()) {
    Log("cannot move the task files of cluster " + old_id + " aside: " + moved.status().message(),
        logging::Level::kError);
    return true;  // the new cluster's tasks still run; a log may then begin with an old one
  }
  Log("moved " + std::to_string(*moved) + " task files of cluster " + old_id + " to " +
      archive_dir_ + "/" + old_id);
  return true;
}

bool ClusterMembership::WaitForExits(const std::vector<TaskKey>& tasks, DurationMs limit_ms) {
  const TimeMs deadline = clock_.MonoMs() + limit_ms;
  for (;;) {
    const std::vector<TaskKey> running = host_.Running();
    const bool any = std::any_of(tasks.begin(), tasks.end(), [&](const TaskKey& k) {
      return std::binary_search(running.begin(), running.end(), k);
    });
    if (!any) return true;
    if (clock_.MonoMs() >= deadline) return false;
    if (host_.Pause(20)) return false;
  }
}

bool ClusterMembership::IsOld(const TaskKey& task) const {
  std::lock_guard<std::mutex> lock(mu_);
  return old_.count(task) > 0;
}

bool ClusterMembership::ForgetOld(const TaskKey& task) {
  std::lock_guard<std::mutex> lock(mu_);
  return old_.erase(task) > 0;
}

void ClusterMembership::RemoveOld(std::vector<TaskKey>* tasks) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(*tasks, [&](const TaskKey& task) { return old_.count(task) > 0; });
}

bool ClusterMembership::DropOldExit(const TaskExit& e) {
  if (!ForgetOld({e.id, e.attempt})) return false;
  host_.Acknowledge({e.id, e.attempt});
  Log("task " + std::to_string(e.id) + " attempt " + std::to_string(e.attempt) +
          " of the previous cluster ended (" +
          (e.reason.empty() ? "exit " + std::to_string(e.exit_code) : e.reason) +
          "); not reported",
      logging::Level::kInfo, e.id);
  return true;
}

}  // namespace gpusched::agent
