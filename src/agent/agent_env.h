#pragma once
// AgentEnv: what the agent itself does to the node's filesystem (issue 40 asks for "an agent
// environment for files, processes and the server link, as LevelDB's Env"): the NUMA nodes'
// CPU lists, its data dir and the task-file folder in it, the cluster files (issue 39) and
// the sweep of old task files. The processes are the TaskExecutor's (task_executor.h) and
// the server link is ServerLink's (server_link.h): seams of their own already. What the
// agent reads back of a task's files (task_files.h) is opened relative to the folder's
// descriptor, and stays there.
//
// One implementation, RealAgentEnv: the host's filesystem, with the system's node folder a
// parameter so a test can point it at a folder of its own.
//
// Thread-safety: stateless; every method may be called from any thread (calls on one data
// dir's cluster files must not overlap: cluster_identity.h).

#include <map>
#include <memory>
#include <set>
#include <string>

#include "agent/task_executor.h"
#include "agent/task_files.h"
#include "base/clock.h"
#include "base/status.h"

namespace gpusched::agent {

// The agent's data dir, opened.
struct DataDir {
  std::string path;     // absolute, normalised
  std::string log_dir;  // PATH/logs: the task files
  DirFd log_dir_fd;     // log_dir, to open every task file relative to (task_files.h)
};

class AgentEnv {
 public:
  virtual ~AgentEnv() = default;

  // NUMA node -> its CPU list ("0-7,16-23"), for each node whose list can be read; empty
  // when none can (no NUMA information: tasks are not pinned).
  virtual std::map<int, std::string> NumaCpus() = 0;
  // Makes `path` the agent's data dir: created if missing and private to this user
  // (base/private_dir.h), made absolute, with its logs/ folder created and opened.
  // Errors name the field "data-dir" and the path.
  virtual StatusOr<DataDir> OpenDataDir(const std::string& path) = 0;

  // The cluster files of `data_dir` (cluster_identity.h): the recorded id ("" = none), a
  // new one recorded, the task files moved aside into clusters/OLD_ID.
  virtual StatusOr<std::string> ReadClusterId(const std::string& data_dir) = 0;
  virtual Status RecordClusterId(const std::string& data_dir, const std::string& id) = 0;
  virtual StatusOr<int> ArchiveTaskFiles(const std::string& data_dir,
                                         const std::string& old_id) = 0;

  // Removes the files of the tasks in `log_dir_fd` that ended before `ended_before_ms`
  // (wall time), but `keep`'s (task_files.h RemoveOldTaskFiles); how many it removed.
  virtual int RemoveOldTaskFiles(int log_dir_fd, TimeMs ended_before_ms,
                                 const std::set<TaskKey>& keep) = 0;
};

class RealAgentEnv final : public AgentEnv {
 public:
  // `node_dir`: the system's NUMA node folder (node0/cpulist, ...).
  explicit RealAgentEnv(std::string node_dir = "/sys/devices/system/node")
      : node_dir_(std::move(node_dir)) {}

  std::map<int, std::string> NumaCpus() override;
  StatusOr<DataDir> OpenDataDir(const std::string& path) override;
  StatusOr<std::string> ReadClusterId(const std::string& data_dir) override;
  Status RecordClusterId(const std::string& data_dir, const std::string& id) override;
  StatusOr<int> ArchiveTaskFiles(const std::string& data_dir,
                                 const std::string& old_id) override;
  int RemoveOldTaskFiles(int log_dir_fd, TimeMs ended_before_ms,
                         const std::set<TaskKey>& keep) override;

 private:
  const std::string node_dir_;
};

}  // namespace gpusched::agent
