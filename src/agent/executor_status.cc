#include "agent/executor_status.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <limits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/units.h"

namespace gpusched::agent {
namespace {

// The stat text of PROC/PID; nullopt when it cannot be read.
std::optional<ProcStat> ReadStat(const std::string& proc_root, const std::string& pid) {
  const std::optional<std::string> text = ReadProcFile(proc_root + "/" + pid + "/stat", 4096);
  if (!text) return std::nullopt;
  return ParseProcStat(*text);
}

bool IsNumber(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::optional<std::string> ReadProcFd(int fd, size_t max_bytes) {
  std::string out;
  char buf[4096];
  while (out.size() < max_bytes) {
    const ssize_t n = read(fd, buf, std::min(sizeof buf, max_bytes - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;  // ESRCH: the process ended after the open
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::optional<std::string> ReadProcFile(const std::string& path, size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> out = ReadProcFd(fd, max_bytes);
  close(fd);
  return out;
}

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  // comm may hold spaces and parentheses: the fields after it follow the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::istringstream rest{std::string(text.substr(close + 1))};
  ProcStat s;
  long long ppid = 0, pgrp = 0;
  if (!(rest >> s.state >> ppid >> pgrp)) return std::nullopt;
  if (pgrp <= 0 || pgrp > std::numeric_limits<pid_t>::max()) return std::nullopt;
  s.pgrp = static_cast<pid_t>(pgrp);
  return s;
}

std::optional<HeartbeatFile> ParseHeartbeatEnviron(std::string_view environ) {
  const std::string_view file_var = std::string_view(kHeartbeatFileEnv);
  const std::string_view timeout_var = std::string_view(kHeartbeatTimeoutEnv);
  HeartbeatFile f;
  bool timeout_seen = false;
  while (!environ.empty()) {
    const size_t end = environ.find('\0');
    const std::string_view var = environ.substr(0, end);
    environ = end == std::string_view::npos ? std::string_view() : environ.substr(end + 1);
    const size_t eq = var.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = var.substr(0, eq), value = var.substr(eq + 1);
    if (name == file_var) f.path = std::string(value);
    if (name == timeout_var) {
      // A whole number (the agent writes it): anything else means no heartbeat file.
      int64_t ms = 0;
      const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
      if (ec != std::errc() || p != value.data() + value.size()) return std::nullopt;
      f.timeout_ms = ms;
      timeout_seen = true;
    }
  }
  if (f.path.empty() || !timeout_seen || f.timeout_ms <= 0) return std::nullopt;
  return f;
}

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
  const std::optional<std::string> text =
      ReadProcFile(proc_root + "/" + std::to_string(pid) + "/environ");
  if (!text) return std::nullopt;
  return ParseHeartbeatEnviron(*text);
}

std::optional<std::string> StaleHeartbeat(const HeartbeatFile& file, TimeMs started_ms,
                                          TimeMs now_ms) {
  struct stat st {};
  const bool exists = lstat(file.path.c_str(), &st) == 0;
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
      if (f && heartbeat_path_) f->path = heartbeat_path_(key);
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
