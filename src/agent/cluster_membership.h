#pragma once
// ClusterMembership: which cluster (the server's store, base/cluster_id.h) this node's tasks
// and task files belong to, and the change to another one (issue 39; issue 40: split out of
// Agent::Impl). A Registered naming another cluster than the recorded one makes everything
// here the old cluster's: its tasks are left out of heartbeats and registrations, their
// starts and exits are never reported (their ids are the old store's), and its exits the
// server had not acknowledged are acknowledged here once its files are moved aside.
//
// The change (Join, on the agent's work thread, ahead of every message of the new server)
// stops the old cluster's tasks, waits for them (the kill grace and 5 s more), moves the task
// files aside, acknowledges the old exits and only then records the new id. An agent that
// stops first records nothing, and a record that fails leaves the old id on disk: either
// way the next agent on this data dir finds the old id and does it again.
//
// What it needs of the agent comes through Host: the executor's running list, kills and
// acknowledgements, the cluster files (cluster_identity.h), a pause that ends when the agent
// stops, and the logger, so a test drives it with fakes.
//
// Thread-safety: thread-safe. Its mutex is a leaf: no Host call is made while it is held.
// The agent calls Note and MarkOld under its own lock, so what they change stays consistent
// with its work queue and unacknowledged exits.

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/task_executor.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/status.h"

namespace gpusched::agent {

class ClusterMembership {
 public:
  // What the cluster change needs of the agent.
  class Host {
   public:
    virtual ~Host() = default;
    // The tasks the executor runs, sorted.
    virtual std::vector<TaskKey> Running() = 0;
    // Stops `task`: `grace_ms` after SIGTERM, SIGKILL.
    virtual void Kill(const TaskKey& task, DurationMs grace_ms, const std::string& reason) = 0;
    // The executor forgets the exit of `task` (its journal records), as at a server's ack.
    virtual void Acknowledge(const TaskKey& task) = 0;
    // Records `id` as the cluster of the data dir's files (ClusterIdentity::Record).
    virtual Status Record(const std::string& id) = 0;
    // Moves the task files aside into the old cluster's folder; how many entries moved
    // (ClusterIdentity::ArchiveTaskFiles).
    virtual StatusOr<int> ArchiveTaskFiles(const std::string& old_id) = 0;
    // Waits `ms` of the clock, less when the agent stops; true when the agent is stopping.
    virtual bool Pause(DurationMs ms) = 0;
    // True once the agent is stopping.
    virtual bool Stopping() = 0;
    virtual void Log(const std::string& line, logging::Level level,
                     std::optional<uint64_t> task) = 0;
  };

  // What a Registered's cluster id asks of the agent.
  enum class Change {
    kNone,   // nothing: the recorded id and no change pending, or no (valid) id
    kJoin,   // queue the change for the work thread (Join)
    kLeave,  // the same, after handing what is here to MarkOld: it is the old cluster's
  };

  // `recorded`: the id DATA_DIR/cluster_id holds ("" = none); `archive_dir`: where the old
  // clusters' files go (DATA_DIR/clusters), for messages.
  ClusterMembership(Host& host, Clock& clock, std::string recorded, std::string archive_dir);

  // The cluster this node's files belong to ("" = none yet); registrations carry it.
  std::string id() const;

  // Link thread: a Registered named cluster `id`. An empty id (a server older than cluster
  // ids) or one that is not an id (logged) changes nothing, nor does the recorded one when
  // no change is pending. Otherwise `id` is the one being joined.
  Change Note(const std::string& id);
  // The old cluster's tasks (running or being launched here) and its exits the server has
  // not acknowledged (acknowledged here once the files are moved aside).
  void MarkOld(const std::vector<TaskKey>& tasks, const std::vector<TaskKey>& exits);
  // Work thread: records `id`; first, when another one was recorded, stops that cluster's
  // tasks (`kill_grace_ms`) and moves their files aside. Keeps the old id when the agent
  // stops before the files are moved.
  void Join(const std::string& id, DurationMs kill_grace_ms);

  // Whether `task` is the old cluster's (its start is not reported).
  bool IsOld(const TaskKey& task) const;
  // Forgets `task` as the old cluster's; true when it was (its exit is not reported).
  bool ForgetOld(const TaskKey& task);
  // Removes the old cluster's tasks from `tasks` (heartbeats, registrations).
  void RemoveOld(std::vector<TaskKey>* tasks) const;
  // Executor thread: an exit of one of the old cluster's tasks is acknowledged here and
  // logged, never reported: true. False for any other.
  bool DropOldExit(const TaskExit& e);

 private:
  // Stops the old cluster's tasks and moves its files aside; false when the agent stopped
  // first.
  bool Leave(const std::string& old_id, const std::string& id, DurationMs kill_grace_ms);
  // Waits until none of `tasks` runs, for at most `limit_ms`; false when some still do or
  // the agent stops.
  bool WaitForExits(const std::vector<TaskKey>& tasks, DurationMs limit_ms);
  void Log(const std::string& line, logging::Level level = logging::Level::kInfo,
           std::optional<uint64_t> task = std::nullopt) {
    host_.Log(line, level, task);
  }

  Host& host_;
  Clock& clock_;
  const std::string archive_dir_;
  mutable std::mutex mu_;
  std::string id_;       // the recorded cluster (or, after a failed record, the joined one)
  std::string joining_;  // a Registered's id the work thread has yet to join
  std::set<TaskKey> old_;              // the old cluster's tasks, running or launching
  std::vector<TaskKey> dropped_exits_;  // its unacknowledged exits, acked after the move
};

}  // namespace gpusched::agent
