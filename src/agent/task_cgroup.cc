#include "agent/task_cgroup.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "agent/executor_status.h"

namespace gpusched::agent {
namespace {

constexpr int64_t kCpuPeriodUs = 100'000;
// How long Remove waits for the processes it killed to leave the cgroup.
constexpr int kRemoveTries = 100;
constexpr int kRemoveSleepMs = 2;

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool HasToken(std::string_view list, std::string_view token, char sep) {
  for (std::string_view t : Split(list, sep)) {
    if (t == token) return true;
  }
  return false;
}

// "<mount><path>" for a process's cgroup `path` on a hierarchy mounted at `mount` whose own
// root is `root` (not "/" inside some containers).
std::string Join(std::string_view mount, std::string_view root, std::string_view path) {
  if (root != "/" && path.substr(0, root.size()) == root) path.remove_prefix(root.size());
  std::string out(mount);
  if (!path.empty() && path != "/") out += std::string(path);
  return out;
}

// The value after `key` on its line of a "key value" file (memory.events, oom_control).
std::optional<int64_t> KeyedValue(const std::string& text, std::string_view key) {
  for (std::string_view line : Split(text, '\n')) {
    if (line.size() > key.size() && line.substr(0, key.size()) == key &&
        line[key.size()] == ' ') {
      try {
        return std::stoll(std::string(line.substr(key.size() + 1)));
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

std::string TaskDirName(const TaskKey& key) {
  return "task-" + std::to_string(key.first) + "-" + std::to_string(key.second);
}

}  // namespace

CgroupLayout DetectCgroupLayout(std::string_view mountinfo, std::string_view self_cgroup,
                                CgroupOps& ops) {
  // Own paths: "0::/path" (v2), "4:memory:/path" or "1:cpu,cpuacct:/path" (v1).
  std::string v2_path;
  std::map<std::string, std::string> v1_path;  // controller -> path
  for (std::string_view line : Split(self_cgroup, '\n')) {
    const size_t a = line.find(':'), b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(a + 1, b - a - 1);
    const std::string path(line.substr(b + 1));
    if (line.substr(0, a) == "0" && controllers.empty()) v2_path = path;
    for (std::string_view c : Split(controllers, ',')) v1_path[std::string(c)] = path;
  }
  CgroupLayout v1, v2;
  v1.version = CgroupVersion::kV1;
  v2.version = CgroupVersion::kV2;
  for (std::string_view line : Split(mountinfo, '\n')) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
    const size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    const std::vector<std::string_view> head = Split(line.substr(0, dash), ' ');
    const std::vector<std::string_view> tail = Split(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    const std::string_view root = head[3], mount = head[4];
    if (tail[0] == "cgroup2" && v2.v2_dir.empty()) {
      v2.v2_dir = Join(mount, root, v2_path.empty() ? "/" : v2_path);
    } else if (tail[0] == "cgroup") {
      for (auto [name, dir] : {std::pair{"memory", &v1.memory_dir}, std::pair{"cpu", &v1.cpu_dir},
                               std::pair{"devices", &v1.devices_dir}}) {
        if (HasToken(tail[2], name, ',') && v1_path.count(name) && dir->empty()) {
          *dir = Join(mount, root, v1_path[name]);
        }
      }
    }
  }
  if (!v2.v2_dir.empty()) {
    StatusOr<std::string> offered = ops.Read(v2.v2_dir + "/cgroup.controllers");
    std::string words = offered.ok() ? *offered : "";
    std::replace(words.begin(), words.end(), '\n', ' ');
    if (HasToken(words, "memory", ' ')) return v2;
  }
  if (!v1.memory_dir.empty()) return v1;
  if (!v2.v2_dir.empty()) return v2;
  CgroupLayout none;
  none.why_none = "no cgroup file system is mounted";
  return none;
}

CgroupLayout DetectCgroupLayout(CgroupOps& ops) {
  auto read = [](const char* path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  return DetectCgroupLayout(read("/proc/self/mountinfo"), read("/proc/self/cgroup"), ops);
}

std::string CgroupSubtreeName(const std::string& agent_name, const std::string& data_dir) {
  uint32_t hash = 2166136261u;  // FNV-1a
  for (unsigned char c : data_dir) hash = (hash ^ c) * 16777619u;
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", hash);
  return agent_name.substr(0, 200) + "-" + hex;
}

TaskCgroups::TaskCgroups(CgroupLayout layout, std::string subtree,
                         std::unique_ptr<CgroupOps> ops)
    : layout_(std::move(layout)), subtree_(std::move(subtree)), ops_(std::move(ops)) {}

std::string TaskCgroups::SubtreeOf(const std::string& own) const {
  return own + "/gpusched/" + subtree_;
}

void TaskCgroups::Init() {
  if (layout_.version == CgroupVersion::kV2) InitV2();
  if (layout_.version == CgroupVersion::kV1) InitV1();
  if (layout_.version == CgroupVersion::kNone) not_enforced_ = layout_.why_none;
}

void TaskCgroups::InitV2() {
  const std::string own = layout_.v2_dir;
  StatusOr<std::string> offered = ops_->Read(own + "/cgroup.controllers");
  std::string words = offered.ok() ? *offered : "";
  std::replace(words.begin(), words.end(), '\n', ' ');
  std::string want;
  for (const char* c : {"memory", "cpu"}) {
    if (HasToken(words, c, ' ')) want += std::string(want.empty() ? "+" : " +") + c;
  }
  Status s = ops_->MakeDir(own + "/gpusched");
  if (s.ok()) s = ops_->MakeDir(SubtreeOf(own));
  if (!s.ok()) {
    not_enforced_ = s.message();
    return;
  }
  Status enabled = Status::Ok();
  if (!want.empty()) {
    enabled = ops_->Write(own + "/cgroup.subtree_control", want);
    if (!enabled.ok()) {
      // No processes in inner cgroups: this agent leaves its own for a leaf, and tries again.
      if (ops_->MakeDir(own + "/agent").ok() &&
          ops_->Write(own + "/agent/cgroup.procs", std::to_string(getpid())).ok()) {
        enabled = ops_->Write(own + "/cgroup.subtree_control", want);
      }
    }
    if (enabled.ok()) enabled = ops_->Write(own + "/gpusched/cgroup.subtree_control", want);
    if (enabled.ok()) enabled = ops_->Write(SubtreeOf(own) + "/cgroup.subtree_control", want);
  }
  enforced_.memory = enabled.ok() && want.find("memory") != std::string::npos;
  enforced_.cpu = enabled.ok() && want.find("cpu") != std::string::npos;
  // Allowing every GPU is allowing everything: this checks that device programs attach.
  std::vector<int> all(254);
  for (int m = 0; m < 254; ++m) all[static_cast<size_t>(m)] = m;
  const Status devices = ops_->AttachGpuDeviceFilter(SubtreeOf(own), all);
  enforced_.devices = devices.ok();
  if (!enabled.ok()) not_enforced_ = enabled.message();
  else if (!enforced_.memory) not_enforced_ = "the memory controller is not offered at " + own;
  if (!devices.ok()) not_enforced_ += (not_enforced_.empty() ? "" : "; ") + devices.message();
}

void TaskCgroups::InitV1() {
  for (auto [own, on] : {std::pair{&layout_.memory_dir, &enforced_.memory},
                         std::pair{&layout_.cpu_dir, &enforced_.cpu},
                         std::pair{&layout_.devices_dir, &enforced_.devices}}) {
    if (own->empty()) continue;
    Status s = ops_->MakeDir(*own + "/gpusched");
    if (s.ok()) s = ops_->MakeDir(SubtreeOf(*own));
    *on = s.ok();
    if (!s.ok() && not_enforced_.empty()) not_enforced_ = s.message();
  }
  if (layout_.memory_dir.empty() || layout_.cpu_dir.empty() || layout_.devices_dir.empty()) {
    not_enforced_ += std::string(not_enforced_.empty() ? "" : "; ") +
                     "a cgroup v1 controller (memory, cpu or devices) is not mounted";
  }
}

std::string TaskCgroups::Describe() const {
  std::string on, off;
  for (auto [name, yes] : {std::pair{"memory (--mem)", enforced_.memory},
                           std::pair{"CPU (--cpu)", enforced_.cpu},
                           std::pair{"GPU device nodes", enforced_.devices}}) {
    (yes ? on : off) += std::string((yes ? on : off).empty() ? "" : ", ") + name;
  }
  const char* version = layout_.version == CgroupVersion::kV2   ? "cgroup v2"
                        : layout_.version == CgroupVersion::kV1 ? "cgroup v1"
                                                                : "cgroups";
  if (off.empty()) return std::string("tasks run in their own ") + version + ": " + on +
                          " enforced";
  std::string line = std::string(version) + ": tasks' " + off + " are not enforced";
  if (!not_enforced_.empty()) line += " (" + not_enforced_ + ")";
  if (!on.empty()) line += "; enforced: " + on;
  else line += "; their processes are found by process group";
  return line;
}

std::vector<std::string> TaskCgroups::DirsOf(const TaskKey& key) const {
  std::vector<std::string> out;
  const std::string name = "/" + TaskDirName(key);
  if (layout_.version == CgroupVersion::kV2 && enabled()) {
    out.push_back(SubtreeOf(layout_.v2_dir) + name);
  } else if (layout_.version == CgroupVersion::kV1) {
    if (enforced_.memory) out.push_back(SubtreeOf(layout_.memory_dir) + name);
    if (enforced_.cpu) out.push_back(SubtreeOf(layout_.cpu_dir) + name);
    if (enforced_.devices) out.push_back(SubtreeOf(layout_.devices_dir) + name);
  }
  return out;
}

Status TaskCgroups::CreateV2(const std::string& dir, const TaskLimits& limits) {
  GS_RETURN_IF_ERROR(ops_->MakeDir(dir));
  if (enforced_.memory && limits.mem_mib > 0) {
    GS_RETURN_IF_ERROR(ops_->Write(dir + "/memory.max", std::to_string(limits.mem_mib << 20)));
    if (ops_->Exists(dir + "/memory.swap.max")) {
      GS_RETURN_IF_ERROR(ops_->Write(dir + "/memory.swap.max", "0"));
    }
  }
  if (enforced_.cpu && limits.cpu_milli > 0) {
    const int64_t quota = std::max<int64_t>(limits.cpu_milli * kCpuPeriodUs / 1000, 1000);
    GS_RETURN_IF_ERROR(ops_->Write(dir + "/cpu.max", std::to_string(quota) + " " +
                                                         std::to_string(kCpuPeriodUs)));
  }
  if (enforced_.devices) GS_RETURN_IF_ERROR(ops_->AttachGpuDeviceFilter(dir, limits.gpus));
  return Status::Ok();
}

Status TaskCgroups::CreateV1(const TaskKey& key, const TaskLimits& limits) {
  const std::string name = "/" + TaskDirName(key);
  if (enforced_.memory) {
    const std::string dir = SubtreeOf(layout_.memory_dir) + name;
    GS_RETURN_IF_ERROR(ops_->MakeDir(dir));
    if (limits.mem_mib > 0) {
      const std::string bytes = std::to_string(limits.mem_mib << 20);
      GS_RETURN_IF_ERROR(ops_->Write(dir + "/memory.limit_in_bytes", bytes));
      // Memory and swap together: the limit is not escaped by swapping.
      if (ops_->Exists(dir + "/memory.memsw.limit_in_bytes")) {
        GS_RETURN_IF_ERROR(ops_->Write(dir + "/memory.memsw.limit_in_bytes", bytes));
      }
    }
  }
  if (enforced_.cpu) {
    const std::string dir = SubtreeOf(layout_.cpu_dir) + name;
    GS_RETURN_IF_ERROR(ops_->MakeDir(dir));
    if (limits.cpu_milli > 0) {
      const int64_t quota = std::max<int64_t>(limits.cpu_milli * kCpuPeriodUs / 1000, 1000);
      GS_RETURN_IF_ERROR(ops_->Write(dir + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs)));
      GS_RETURN_IF_ERROR(ops_->Write(dir + "/cpu.cfs_quota_us", std::to_string(quota)));
    }
  }
  if (enforced_.devices) {
    const std::string dir = SubtreeOf(layout_.devices_dir) + name;
    GS_RETURN_IF_ERROR(ops_->MakeDir(dir));
    for (int m = 0; m < limits.node_gpus; ++m) {
      if (std::find(limits.gpus.begin(), limits.gpus.end(), m) != limits.gpus.end()) continue;
      GS_RETURN_IF_ERROR(ops_->Write(dir + "/devices.deny", "c 195:" + std::to_string(m) + " rwm"));
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<int>> TaskCgroups::Create(const TaskKey& key, const TaskLimits& limits) {
  const std::vector<std::string> dirs = DirsOf(key);
  if (dirs.empty()) return std::vector<int>{};
  Status s = layout_.version == CgroupVersion::kV2 ? CreateV2(dirs[0], limits)
                                                   : CreateV1(key, limits);
  std::vector<int> fds;
  for (size_t i = 0; s.ok() && i < dirs.size(); ++i) {
    const int fd = ops_->OpenForWrite(dirs[i] + "/cgroup.procs");
    if (fd < 0) {
      s = FailedPrecondition("cgroup: cannot open " + dirs[i] + "/cgroup.procs: " +
                             std::strerror(-fd));
    } else {
      fds.push_back(fd);
    }
  }
  if (!s.ok()) {
    for (int fd : fds) close(fd);
    Remove(key);
    return FailedPrecondition("cgroup: " + s.message());
  }
  return fds;
}

std::vector<pid_t> TaskCgroups::Pids(const TaskKey& key) {
  std::vector<pid_t> out;
  const std::vector<std::string> dirs = DirsOf(key);
  if (dirs.empty()) return out;
  StatusOr<std::string> procs = ops_->Read(dirs[0] + "/cgroup.procs");
  if (!procs.ok()) return out;
  for (std::string_view line : Split(*procs, '\n')) {
    if (line.empty()) continue;
    try {
      out.push_back(static_cast<pid_t>(std::stol(std::string(line))));
    } catch (const std::exception&) {
    }
  }
  return out;
}

std::string TaskCgroups::OutOfMemoryReason(const TaskKey& key) {
  if (!enforced_.memory) return "";
  const std::string dir = DirsOf(key).at(0);  // memory's comes first
  const bool v2 = layout_.version == CgroupVersion::kV2;
  StatusOr<std::string> events = ops_->Read(dir + (v2 ? "/memory.events" : "/memory.oom_control"));
  if (!events.ok()) return "";
  std::optional<int64_t> kills = KeyedValue(*events, "oom_kill");
  if (!kills && !v2) {  // kernels before 4.13: the limit was hit at least
    StatusOr<std::string> failcnt = ops_->Read(dir + "/memory.failcnt");
    if (failcnt.ok()) kills = KeyedValue("failcnt " + *failcnt, "failcnt");
  }
  if (!kills || *kills <= 0) return "";
  StatusOr<std::string> limit = ops_->Read(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
  std::optional<int64_t> bytes = limit.ok() ? KeyedValue("limit " + *limit, "limit") : std::nullopt;
  if (!bytes) return "out of memory (killed at its memory limit)";
  return "out of memory (limit " + FormatSizeMiB(*bytes >> 20) + ")";
}

void TaskCgroups::Remove(const TaskKey& key) {
  const std::vector<std::string> dirs = DirsOf(key);
  if (dirs.empty()) return;
  for (int attempt = 0; attempt < kRemoveTries; ++attempt) {
    for (pid_t pid : Pids(key)) ops_->Kill(pid, SIGKILL);
    bool all = true;
    for (const std::string& dir : dirs) all = ops_->RemoveDir(dir).ok() && all;
    if (all) return;
    ops_->SleepMs(kRemoveSleepMs);
  }
}

void TaskCgroups::RemoveSubtreeIfEmpty() {
  for (const std::string* own : {&layout_.v2_dir, &layout_.memory_dir, &layout_.cpu_dir,
                                 &layout_.devices_dir}) {
    if (!own->empty()) (void)ops_->RemoveDir(SubtreeOf(*own));  // busy while tasks run on
  }
}

std::map<pid_t, TaskKey> PidsByProcessGroup(const std::map<pid_t, TaskKey>& pgids,
                                            const std::string& proc_root) {
  std::map<pid_t, TaskKey> out;
  if (pgids.empty()) return out;
  DIR* dir = opendir(proc_root.c_str());
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    // A process that ended meanwhile cannot be read: it is simply gone (ReadProcFile).
    const std::optional<std::string> read =
        ReadProcFile(proc_root + "/" + e->d_name + "/stat", 4096);
    if (!read) continue;
    const std::string& stat = *read;
    // PID (COMM) STATE PPID PGRP ...: COMM may hold spaces and parentheses; the last ')' ends it.
    const size_t close_paren = stat.rfind(')');
    if (close_paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(close_paren + 1));
    std::string state;
    long ppid = 0, pgrp = 0;
    if (!(rest >> state >> ppid >> pgrp)) continue;
    auto it = pgids.find(static_cast<pid_t>(pgrp));
    if (it != pgids.end()) out[static_cast<pid_t>(pid)] = it->second;
  }
  closedir(dir);
  return out;
}

}  // namespace gpusched::agent
