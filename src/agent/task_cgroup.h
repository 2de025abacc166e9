#pragma once
// TaskCgroups: each task in a cgroup of its own (issue 35), created by the agent under its
// own subtree: cgroup v2 where the host's memory controller is there, v1 (memory, cpu,
// devices) otherwise. A task's cgroup carries its limits:
//  - memory: memory.max (v2) / memory.limit_in_bytes (v1) from the task's --mem, swap off
//    for it (memory.swap.max 0 / memory.memsw.limit_in_bytes where the files exist);
//  - CPU: cpu.max (v2) / cpu.cfs_quota_us over a 100 ms period (v1) from --cpu (millicores);
//  - GPU device nodes: every NVIDIA GPU node (char 195:M) other than the task's own GPUs is
//    denied (v1: devices.deny per GPU of the node; v2: a BPF_PROG_TYPE_CGROUP_DEVICE program
//    denying 195:M for every M < 254 not the task's). nvidiactl (195:255), nvidia-modeset
//    (195:254), nvidia-uvm and every other device stay allowed. Minor M is the GPU's index on
//    the node (simulated GPUs map to the same numbers).
// The shim joins the cgroup between clone and exec (ShimSpawner writes "0" into each
// cgroup.procs the runner opened), so the shim and everything the task forks sit in it from
// the start; the task's processes are found by cgroup.procs, never by their environment.
// A task's cgroup is removed when its exit is settled (what is left in it is killed first).
//
// Layout: <the agent's own cgroup>/gpusched/<subtree>/task-<id>-<attempt>, in each v1
// hierarchy used or in the v2 one, <subtree> from CgroupSubtreeName. The path depends only on
// the agent's name and data dir and the task, so an agent restarted on the same data dir
// finds the cgroups of the tasks it adopts.
//
// Thread-safety: every method may be called from any thread (the manager keeps no state
// after Init but its layout; the seam must be thread-safe).

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/task_executor.h"
#include "base/status.h"
#include "base/units.h"

namespace gpusched::agent {

// The operating system under the cgroup code: the seam tests replace (testing/fake_cgroup_fs.h).
class CgroupOps {
 public:
  virtual ~CgroupOps() = default;
  // mkdir (mode 0755); an existing directory is fine.
  virtual Status MakeDir(const std::string& path) = 0;
  // rmdir; a missing directory is fine. FailedPrecondition while processes remain (EBUSY).
  virtual Status RemoveDir(const std::string& path) = 0;
  virtual Status Write(const std::string& path, std::string_view text) = 0;
  virtual StatusOr<std::string> Read(const std::string& path) = 0;
  virtual bool Exists(const std::string& path) = 0;
  // A descriptor open for writing (O_WRONLY | O_CLOEXEC), or -errno. The caller closes it.
  virtual int OpenForWrite(const std::string& path) = 0;
  // cgroup v2: attaches a device program to the cgroup at `dir` that denies char 195:M for
  // every M < 254 not in `allowed_gpus` and allows every other device.
  virtual Status AttachGpuDeviceFilter(const std::string& dir,
                                       const std::vector<int>& allowed_gpus) = 0;
  virtual void Kill(pid_t pid, int sig) = 0;
  virtual void SleepMs(int ms) = 0;
};

// The real one: system calls on the cgroup file systems, bpf(2) for the device program.
std::unique_ptr<CgroupOps> MakeRealCgroupOps();

enum class CgroupVersion { kNone, kV1, kV2 };

// Where the agent's own cgroups are (absolute directories; "" = that one is not mounted).
struct CgroupLayout {
  CgroupVersion version = CgroupVersion::kNone;
  std::string v2_dir;  // kV2: the agent's own cgroup in the unified hierarchy
  std::string memory_dir, cpu_dir, devices_dir;  // kV1: its own cgroup in each hierarchy
  std::string why_none;  // kNone: why
};

// The layout from /proc/self/mountinfo and /proc/self/cgroup (texts), and which hierarchy
// holds the memory controller: v2 when the unified hierarchy offers it (its cgroup.controllers,
// read through `ops`), else v1 when the memory hierarchy is mounted, else v2 without
// controllers (devices only), else none.
CgroupLayout DetectCgroupLayout(std::string_view mountinfo, std::string_view self_cgroup,
                                CgroupOps& ops);
// The same from this process's /proc files.
CgroupLayout DetectCgroupLayout(CgroupOps& ops);

// "NAME-HASH": the node name (cut to fit a file name) and 8 hex digits of a hash of the data
// dir, so two agents of one name on one machine (tests, a second data dir) never share
// their tasks' cgroups.
std::string CgroupSubtreeName(const std::string& agent_name, const std::string& data_dir);

class TaskCgroups {
 public:
  // What this agent's tasks' cgroups enforce (decided by Init).
  struct Enforced {
    bool memory = false, cpu = false, devices = false;
  };

  // `subtree`: the agent's directory name under gpusched/ (CgroupSubtreeName).
  TaskCgroups(CgroupLayout layout, std::string subtree, std::unique_ptr<CgroupOps> ops);

  // Creates the agent's subtree (v2: enables memory and cpu for it where offered; an agent
  // that shares its own cgroup with no other process moves into a leaf "agent" first, the
  // rule of no processes in inner cgroups). Never fails: what cannot be enforced is
  // Enforced's false and said by Describe.
  void Init();
  const Enforced& enforced() const { return enforced_; }
  bool enabled() const { return enforced_.memory || enforced_.cpu || enforced_.devices; }
  // One line for the agent's start: what is enforced, and what is not and why.
  std::string Describe() const;

  // Creates the task's cgroup with `limits` and opens each cgroup.procs the task must join
  // (one per hierarchy). Errors name the file. The caller closes the descriptors.
  StatusOr<std::vector<int>> Create(const TaskKey& key, const TaskLimits& limits);
  // The processes in the task's cgroup (from cgroup.procs); empty when it has none.
  std::vector<pid_t> Pids(const TaskKey& key);
  // "out of memory (limit 1GiB)" when the kernel's OOM killer killed a process of the task's
  // cgroup for its limit (v2 memory.events oom_kill; v1 memory.oom_control oom_kill, else
  // memory.failcnt); "" otherwise.
  std::string OutOfMemoryReason(const TaskKey& key);
  // Whether an exit reason is one OutOfMemoryReason made (issue 41: the task's failure is then
  // out_of_memory). Reasons are the agent's own words, never the task's output.
  static bool IsOutOfMemoryReason(const std::string& reason) {
    return reason.rfind("out of memory (", 0) == 0;
  }
  // Kills what is left in the task's cgroup and removes it (each hierarchy's). A cgroup that
  // stays busy (a process stuck in the kernel) is left; a missing one is fine.
  void Remove(const TaskKey& key);

  // Removes the agent's own subtree where it is empty (no task's cgroup left in it), so
  // agents that stop for good leave nothing behind; kept while tasks it left run on.
  void RemoveSubtreeIfEmpty();

  // The task's directory in each hierarchy used (v2: one).
  std::vector<std::string> DirsOf(const TaskKey& key) const;

 private:
  std::string SubtreeOf(const std::string& own) const;
  Status CreateV2(const std::string& dir, const TaskLimits& limits);
  Status CreateV1(const TaskKey& key, const TaskLimits& limits);
  void InitV2();
  void InitV1();

  CgroupLayout layout_;
  std::string subtree_;
  std::unique_ptr<CgroupOps> ops_;
  Enforced enforced_;
  std::string not_enforced_;  // why, for Describe
};

// The task of each process whose process group is one of `pgids` (pgid -> task), from
// /proc/PID/stat under `proc_root`: how tasks' processes are found without cgroups (a task
// can leave its group with setsid, but it cannot join another task's: groups are per session,
// and each shim leads its own session).
std::map<pid_t, TaskKey> PidsByProcessGroup(const std::map<pid_t, TaskKey>& pgids,
                                            const std::string& proc_root = "/proc");

}  // namespace gpusched::agent
