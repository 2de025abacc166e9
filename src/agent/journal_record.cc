#include "agent/journal_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpusched::agent::journal {
namespace {

// Finds "key=" at the start of a line of `text`; returns the value (up to the line's end)
// or nullptr.
const char* FindValue(const char* text, const char* key, size_t* len) {
  const size_t key_len = std::strlen(key);
  for (const char* line = text; *line != '\0';) {
    const char* end = std::strchr(line, '\n');
    if (end == nullptr) end = line + std::strlen(line);
    if (static_cast<size_t>(end - line) > key_len && std::strncmp(line, key, key_len) == 0 &&
        line[key_len] == '=') {
      *len = static_cast<size_t>(end - line) - key_len - 1;
      return line + key_len + 1;
    }
    line = *end == '\0' ? end : end + 1;
  }
  return nullptr;
}

bool FindInt(const char* text, const char* key, long long* out) {
  size_t len = 0;
  const char* v = FindValue(text, key, &len);
  if (v == nullptr || len == 0 || len > 20) return false;
  char digits[24];
  std::memcpy(digits, v, len);
  digits[len] = '\0';
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(digits, &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = n;
  return true;
}

// Copies `src` (up to `len` bytes) into `dst` of `size`, NUL-terminated, newlines as spaces.
void CopyLine(char* dst, size_t size, const char* src, size_t len) {
  size_t n = 0;
  for (; n + 1 < size && n < len && src[n] != '\0'; ++n) {
    dst[n] = src[n] == '\n' || src[n] == '\r' ? ' ' : src[n];
  }
  dst[n] = '\0';
}

void SetError(char* error, size_t error_size, const char* what, const char* path, int err) {
  if (error != nullptr && error_size > 0) {
    std::snprintf(error, error_size, "journal: cannot %s %s: %s", what, path, std::strerror(err));
  }
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

bool RecordName(char* buf, size_t size, unsigned long long id, long long attempt,
                const char* suffix) {
  const int n = std::snprintf(buf, size, "%llu.%lld%s", id, attempt, suffix);
  return n > 0 && static_cast<size_t>(n) < size;
}

bool ParseRecordName(const char* name, const char* suffix, unsigned long long* id,
                     long long* attempt) {
  const size_t len = std::strlen(name), suffix_len = std::strlen(suffix);
  if (len <= suffix_len || std::strcmp(name + len - suffix_len, suffix) != 0) return false;
  if (name[0] < '0' || name[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  *id = std::strtoull(name, &end, 10);
  if (errno != 0 || *end != '.' || end[1] < '0' || end[1] > '9') return false;
  *attempt = std::strtoll(end + 1, &end, 10);
  return errno == 0 && end == name + len - suffix_len;
}

size_t FormatRun(const RunRecord& r, char* buf, size_t size) {
  const int n = std::snprintf(buf, size,
                              "shim_pid=%d\nshim_start_ticks=%lld\nboot_id=%s\ntask_pgid=%d\n"
                              "task_start_ticks=%lld\nstarted_ms=%lld\n",
                              static_cast<int>(r.shim.pid), r.shim.start_ticks, r.shim.boot_id,
                              static_cast<int>(r.task_pgid), r.task_start_ticks, r.started_ms);
  return n > 0 && static_cast<size_t>(n) < size ? static_cast<size_t>(n) : 0;
}

size_t FormatExit(const ExitRecord& r, char* buf, size_t size) {
  char reason[sizeof r.reason];
  CopyLine(reason, sizeof reason, r.reason, sizeof r.reason);
  const int n = std::snprintf(buf, size,
                              "exit_code=%d\nreason=%s\nfinished_ms=%lld\npermanent=%d\n"
                              "exit_end=1\n",
                              r.exit_code, reason, r.finished_ms, r.permanent ? 1 : 0);
  return n > 0 && static_cast<size_t>(n) < size ? static_cast<size_t>(n) : 0;
}

bool ParseRun(const char* text, RunRecord* out) {
  RunRecord r;
  long long shim_pid = 0, task_pgid = 0;
  size_t len = 0;
  const char* boot = FindValue(text, "boot_id", &len);
  if (boot == nullptr || len == 0 || len >= sizeof r.shim.boot_id) return false;
  CopyLine(r.shim.boot_id, sizeof r.shim.boot_id, boot, len);
  if (!FindInt(text, "shim_pid", &shim_pid) || shim_pid <= 0 || shim_pid > INT_MAX ||
      !FindInt(text, "shim_start_ticks", &r.shim.start_ticks) ||
      !FindInt(text, "task_pgid", &task_pgid) || task_pgid <= 0 || task_pgid > INT_MAX ||
      !FindInt(text, "task_start_ticks", &r.task_start_ticks)) {
    return false;
  }
  r.shim.pid = static_cast<pid_t>(shim_pid);
  r.task_pgid = static_cast<pid_t>(task_pgid);
  if (!FindInt(text, "started_ms", &r.started_ms)) r.started_ms = 0;
  *out = r;
  return true;
}

bool ParseExit(const char* text, ExitRecord* out) {
  ExitRecord r;
  long long code = 0, end = 0;
  if (!FindInt(text, "exit_end", &end) || end != 1) return false;  // torn or absent
  if (!FindInt(text, "exit_code", &code) || code < INT_MIN || code > INT_MAX) return false;
  r.exit_code = static_cast<int>(code);
  size_t len = 0;
  if (const char* reason = FindValue(text, "reason", &len)) {
    CopyLine(r.reason, sizeof r.reason, reason, len);
  }
  if (!FindInt(text, "finished_ms", &r.finished_ms)) r.finished_ms = 0;
  long long permanent = 0;  // absent in records of older shims
  r.permanent = FindInt(text, "permanent", &permanent) && permanent == 1;
  *out = r;
  return true;
}

bool WriteRecordAtomic(const char* dir, const char* name, const char* data, size_t size,
                       bool sync, char* error, size_t error_size) {
  char path[PATH_MAX], tmp[PATH_MAX];
  if (std::snprintf(path, sizeof path, "%s/%s", dir, name) >= static_cast<int>(sizeof path) ||
      std::snprintf(tmp, sizeof tmp, "%s%s", path, kTempSuffix) >= static_cast<int>(sizeof tmp)) {
    SetError(error, error_size, "write", dir, ENAMETOOLONG);
    return false;
  }
  const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    SetError(error, error_size, "write", path, errno);
    return false;
  }
  bool ok = WriteAll(fd, data, size) && (!sync || fsync(fd) == 0);
  int err = errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && rename(tmp, path) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    unlink(tmp);
    SetError(error, error_size, "write", path, err);
  }
  return ok;
}

bool SealExit(const char* dir, const char* run_name, const char* exit_name, const char* data,
              size_t size, char* error, size_t error_size) {
  char run[PATH_MAX], exit[PATH_MAX];
  if (std::snprintf(run, sizeof run, "%s/%s", dir, run_name) >= static_cast<int>(sizeof run) ||
      std::snprintf(exit, sizeof exit, "%s/%s", dir, exit_name) >=
          static_cast<int>(sizeof exit)) {
    SetError(error, error_size, "write", dir, ENAMETOOLONG);
    return false;
  }
  const int fd = open(run, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    SetError(error, error_size, "write", run, errno);
    return false;
  }
  bool ok = WriteAll(fd, data, size) && fsync(fd) == 0;
  const int err = errno;
  ok = close(fd) == 0 && ok;
  if (!ok) {
    SetError(error, error_size, "write", run, err);
    return false;
  }
  rename(run, exit);  // on failure the exit lines are still found in the .run
  return true;
}

long ReadRecord(const char* dir, const char* name, char* buf, size_t size) {
  char path[PATH_MAX];
  if (size == 0 || std::snprintf(path, sizeof path, "%s/%s", dir, name) >=
                       static_cast<int>(sizeof path)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  for (;;) {
    const ssize_t n = read(fd, buf + len, size - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      errno = err;
      return -1;
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
    if (len == size - 1) {
      char extra;
      const bool more = read(fd, &extra, 1) > 0;
      close(fd);
      if (more) {
        errno = EFBIG;
        return -1;
      }
      buf[len] = '\0';
      return static_cast<long>(len);
    }
  }
  close(fd);
  buf[len] = '\0';
  return static_cast<long>(len);
}

bool ReadBootId(char (&out)[40]) {
  char buf[64];
  const long n = ReadRecord("/proc/sys/kernel/random", "boot_id", buf, sizeof buf);
  if (n <= 0) return false;
  CopyLine(out, sizeof out, buf, static_cast<size_t>(n));
  const size_t len = std::strlen(out);
  if (len > 0 && out[len - 1] == ' ') out[len - 1] = '\0';  // the newline, made a space
  return out[0] != '\0';
}

bool ReadProcessId(pid_t pid, ProcessId* out) {
  if (pid <= 0) return false;
  char dir[32], buf[1024];
  std::snprintf(dir, sizeof dir, "/proc/%d", static_cast<int>(pid));
  if (ReadRecord(dir, "stat", buf, sizeof buf) <= 0) return false;
  // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses, so fields are
  // counted from the last ')'. STATE is field 3, starttime field 22.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ') return false;
  p += 2;
  if (*p == 'Z' || *p == 'X' || *p == 'x') return false;  // exited, not reaped yet
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  char* end = nullptr;
  errno = 0;
  const long long ticks = std::strtoll(p, &end, 10);
  if (errno != 0 || end == p) return false;
  ProcessId id;
  id.pid = pid;
  id.start_ticks = ticks;
  if (!ReadBootId(id.boot_id)) return false;
  *out = id;
  return true;
}

bool SameProcess(const ProcessId& a, const ProcessId& b) {
  return a.pid == b.pid && a.start_ticks == b.start_ticks &&
         std::strcmp(a.boot_id, b.boot_id) == 0;
}

}  // namespace gpusched::agent::journal
