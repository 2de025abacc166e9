#include "agent/executor_status.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/units.h"

namespace gpusched::agent {
namespace {

struct ProcStat {
  char state = '?';
  pid_t pgrp = 0;
};

// State and process group from PROC/PID/stat: "pid (comm) state ppid pgrp ...", where comm
// may hold spaces and parentheses (hence the last ')').
std::optional<ProcStat> ReadStat(const std::string& proc_root, const std::string& pid) {
  std::ifstream in(proc_root + "/" + pid + "/stat");
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(close + 1));
  ProcStat s;
  long ppid = 0, pgrp = 0;
  if (!(rest >> s.state >> ppid >> pgrp)) return std::nullopt;
  s.pgrp = static_cast<pid_t>(pgrp);
  return s;
}

bool IsNumber(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::set<pid_t> StoppedGroups(const std::set<pid_t>& groups, const std::string& proc_root) {
  // Candidates: groups whose leader is stopped (the common case, a running leader, costs
  // one read). A leader that is gone leaves its group to the shim, which ends it.
  std::set<pid_t> stopped;
  for (pid_t g : groups) {
    auto leader = ReadStat(proc_root, std::to_string(g));
    if (leader && leader->state == 'T' && leader->pgrp == g) stopped.insert(g);
  }
  if (stopped.empty()) return stopped;
  // A group with any other member not stopped (nor exiting) is still at work.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(proc_root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!IsNumber(name)) continue;
    auto s = ReadStat(proc_root, name);
    if (s && stopped.count(s->pgrp) && s->state != 'T' && s->state != 'Z' && s->state != 'X') {
      stopped.erase(s->pgrp);
      if (stopped.empty()) break;
    }
  }
  return stopped;
}

std::optional<HeartbeatFile> HeartbeatFileOf(pid_t pid, const std::string& proc_root) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string file_var = std::string(kHeartbeatFileEnv) + "=";
  const std::string timeout_var = std::string(kHeartbeatTimeoutEnv) + "=";
  HeartbeatFile f;
  std::string var;
  while (std::getline(in, var, '\0')) {
    if (var.rfind(file_var, 0) == 0) f.path = var.substr(file_var.size());
    if (var.rfind(timeout_var, 0) == 0) {
      try {
        f.timeout_ms = std::stoll(var.substr(timeout_var.size()));
      } catch (const std::exception&) {  // not a number: no heartbeat file
        return std::nullopt;
      }
    }
  }
  if (f.path.empty() || f.timeout_ms <= 0) return std::nullopt;
  return f;
}

std::optional<std::string> StaleHeartbeat(const HeartbeatFile& file, TimeMs started_ms,
                                          TimeMs now_ms) {
  struct stat st {};
  const bool exists = stat(file.path.c_str(), &st) == 0;
  const TimeMs mtime_ms =
      exists ? static_cast<TimeMs>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000 : 0;
  // A file older than the task (left by someone else) counts from the start.
  const TimeMs last = std::max(mtime_ms, started_ms);
  if (now_ms - last <= file.timeout_ms) return std::nullopt;
  const std::string limit = " (heartbeat_timeout " + FormatDurationMs(file.timeout_ms) + ")";
  if (!exists || mtime_ms < started_ms) {
    return "heartbeat file not touched since the start " + FormatDurationMs(now_ms - last) +
           " ago" + limit;
  }
  return "heartbeat file not touched for " + FormatDurationMs(now_ms - last) + limit;
}

std::map<TaskKey, TaskObservation> ExecutorObserver::Observe(
    const std::map<TaskKey, TaskProcess>& tasks, TimeMs now_ms) {
  for (auto it = files_.begin(); it != files_.end();) {  // forget the tasks that ended
    it = tasks.count(it->first) ? std::next(it) : files_.erase(it);
  }
  std::set<pid_t> groups;
  for (const auto& [key, p] : tasks) groups.insert(p.pgid);
  const std::set<pid_t> stopped = StoppedGroups(groups, proc_root_);
  std::map<TaskKey, TaskObservation> out;
  for (const auto& [key, p] : tasks) {
    TaskObservation& o = out[key];
    if (stopped.count(p.pgid)) {
      o.health = TaskHealth::kStopped;
      o.detail = "stopped: every process of the task is in state T (SIGSTOP or SIGTSTP)";
      continue;
    }
    auto file = files_.find(key);
    if (file == files_.end()) {
      // Read once; a leader not found yet (the shim is starting it) is asked again later.
      std::optional<HeartbeatFile> f = HeartbeatFileOf(p.pgid, proc_root_);
      std::error_code ec;
      if (!f && !std::filesystem::exists(proc_root_ + "/" + std::to_string(p.pgid), ec)) {
        continue;
      }
      file = files_.emplace(key, std::move(f)).first;
    }
    if (!file->second) continue;
    if (auto stale = StaleHeartbeat(*file->second, p.started_ms, now_ms)) {
      o.health = TaskHealth::kHeartbeatStale;
      o.detail = std::move(*stale);
    }
  }
  return out;
}

}  // namespace gpusched::agent
