#pragma once
// The files of a task that live in the agent's own directory (its log and the side files it
// is told to write: share ledger, simulated peak and utilisation, heartbeat). Every open is
// relative to a descriptor of that directory, with O_NOFOLLOW, so a name planted there (a
// symlink to /etc/shadow, a FIFO) is never followed, given away or read (issue 35). The agent
// creates the side files itself, anew, and hands them to the task's user by descriptor; it
// never opens a path a task named.
//
// Thread-safety: every function is reentrant.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "base/status.h"

namespace gpusched::agent {

// A directory descriptor (O_DIRECTORY, close-on-exec) closed when it goes out of scope.
class DirFd {
 public:
  DirFd() = default;
  explicit DirFd(int fd) : fd_(fd) {}
  DirFd(DirFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  DirFd& operator=(DirFd&& other) noexcept;
  DirFd(const DirFd&) = delete;
  DirFd& operator=(const DirFd&) = delete;
  ~DirFd();
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// Opens the directory `path`. Internal naming it when it cannot.
StatusOr<DirFd> OpenDirectory(const std::string& path);

// "DIR/NAME" -> ("DIR", "NAME"); a path without '/' is in ".".
std::pair<std::string, std::string> SplitPath(const std::string& path);

// Opens the regular file `name` of `dir_fd` for appending, creating it with `mode`; a
// symlink or anything but a regular file there fails (ELOOP, or EINVAL). Returns the
// descriptor (close-on-exec) or Internal naming `what` (the path the error should name).
StatusOr<int> OpenLogForAppend(int dir_fd, const std::string& name, mode_t mode,
                               const std::string& what);

// Creates `name` in `dir_fd` anew (whatever was there, a stale file or a planted link, is
// removed first): O_CREAT | O_EXCL | O_NOFOLLOW, `mode`. With `owner` set, the file is given
// to that uid and gid by descriptor (fchown, fchmod 0600). Returns the descriptor.
StatusOr<int> CreateTaskFile(int dir_fd, const std::string& name, mode_t mode,
                             std::optional<std::pair<uid_t, gid_t>> owner,
                             const std::string& what);

// Up to `max_bytes` of the regular file `name` of `dir_fd` (its last ones with `tail`), read
// without following a symlink; nullopt when it is missing, not a regular file, or unreadable.
std::optional<std::string> ReadTaskFile(int dir_fd, const std::string& name, size_t max_bytes,
                                        bool tail = false);

// Issue 39: removes the task files of `dir_fd` (`task-ID-ATTEMPT.log` and its side files,
// `task-ID-ATTEMPT.log.*`) last modified before `older_than_ms` (wall time, ms since the
// epoch), except those of the (id, attempt)s in `keep`. Only names are removed (unlinkat),
// never what a link points to; other names are left alone. Returns how many were removed.
int RemoveOldTaskFiles(int dir_fd, int64_t older_than_ms,
                       const std::set<std::pair<uint64_t, int64_t>>& keep);

}  // namespace gpusched::agent
