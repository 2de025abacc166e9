#include "agent/task_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace gpusched::agent {

DirFd& DirFd::operator=(DirFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DirFd::~DirFd() {
  if (fd_ >= 0) close(fd_);
}

StatusOr<DirFd> OpenDirectory(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Internal("cannot open the directory " + path + ": " + std::strerror(errno));
  return DirFd(fd);
}

std::pair<std::string, std::string> SplitPath(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

StatusOr<int> OpenLogForAppend(int dir_fd, const std::string& name, mode_t mode,
                               const std::string& what) {
  const int fd = openat(dir_fd, name.c_str(),
                        O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, mode);
  struct stat st {};
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    fcntl(fd, F_SETFL, O_APPEND);  // O_NONBLOCK only kept a planted FIFO from blocking
    return fd;
  }
  const int err = fd < 0 ? errno : EINVAL;
  if (fd >= 0) close(fd);
  return Internal("cannot open " + what + ": " +
                  (err == EINVAL ? std::string("not a regular file") : std::strerror(err)));
}

StatusOr<int> CreateTaskFile(int dir_fd, const std::string& name, mode_t mode,
                             std::optional<std::pair<uid_t, gid_t>> owner,
                             const std::string& what) {
  // unlinkat removes the name itself, never what a link points to.
  if (unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
    return Internal("cannot replace " + what + ": " + std::strerror(errno));
  }
  const int fd = openat(dir_fd, name.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Internal("cannot create " + what + ": " + std::strerror(errno));
  if (owner && (fchown(fd, owner->first, owner->second) != 0 || fchmod(fd, 0600) != 0)) {
    const int err = errno;
    close(fd);
    return Internal("cannot give " + what + " to uid " + std::to_string(owner->first) + ": " +
                    std::strerror(err));
  }
  return fd;
}

std::optional<std::string> ReadTaskFile(int dir_fd, const std::string& name, size_t max_bytes,
                                        bool tail) {
  // O_NONBLOCK: a FIFO is refused below, not waited on.
  const int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return std::nullopt;
  }
  const off_t size = st.st_size;
  const size_t want = std::min<size_t>(max_bytes, static_cast<size_t>(size));
  const off_t from = tail ? size - static_cast<off_t>(want) : 0;
  std::string out(want, '\0');
  size_t got = 0;
  while (got < want) {
    const ssize_t n = pread(fd, out.data() + got, want - got, from + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(got);
  return out;
}

namespace {

// "task-7-1.log" or "task-7-1.log.peak" -> (7, 1); nullopt for any other name.
std::optional<std::pair<uint64_t, int64_t>> TaskKeyOfFile(const char* name) {
  unsigned long long id = 0;
  long long attempt = 0;
  int end = 0;
  if (std::sscanf(name, "task-%llu-%lld.log%n", &id, &attempt, &end) != 2 || end == 0) {
    return std::nullopt;
  }
  if (name[end] != '\0' && name[end] != '.') return std::nullopt;
  return std::make_pair(static_cast<uint64_t>(id), static_cast<int64_t>(attempt));
}

}  // namespace

int RemoveOldTaskFiles(int dir_fd, int64_t older_than_ms,
                       const std::set<std::pair<uint64_t, int64_t>>& keep) {
  const int fd = dup(dir_fd);  // fdopendir takes the descriptor; the caller keeps its own
  if (fd < 0) return 0;
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    close(fd);
    return 0;
  }
  rewinddir(dir);
  std::vector<std::string> old;
  while (const dirent* e = readdir(dir)) {
    const auto key = TaskKeyOfFile(e->d_name);
    if (!key || keep.count(*key) > 0) continue;
    struct stat st {};
    if (fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const int64_t mtime_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 +
                             st.st_mtim.tv_nsec / 1'000'000;
    if (mtime_ms < older_than_ms) old.emplace_back(e->d_name);
  }
  closedir(dir);
  int removed = 0;
  for (const std::string& name : old) {
    if (unlinkat(dir_fd, name.c_str(), 0) == 0) ++removed;
  }
  return removed;
}

}  // namespace gpusched::agent
