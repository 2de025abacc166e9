#include "agent/cluster_identity.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/cluster_id.h"
#include "base/private_dir.h"

namespace gpusched::agent {
namespace {

Status Errno(const std::string& what, const std::string& path) {
  return Unavailable("cluster id: cannot " + what + " " + path + ": " + std::strerror(errno));
}

Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("open", dir);
  const int r = fsync(fd);
  close(fd);
  return r == 0 ? Status::Ok() : Errno("sync", dir);
}

// The names in `dir` but "." and ".." (and `skip`), sorted. A missing `dir` has none.
StatusOr<std::vector<std::string>> ListNames(const std::string& dir, const std::string& skip) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return names;
    return Errno("list", dir);
  }
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != ".." && name != skip) names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

StatusOr<std::string> ClusterIdentity::Read() const {
  const std::string file = path();
  const int fd = open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::string();
    return Errno("open", file);
  }
  char buf[128];
  const ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  if (n < 0) return Errno("read", file);
  std::string id(buf, static_cast<size_t>(n));
  if (!id.empty() && id.back() == '\n') id.pop_back();
  if (Status valid = ValidateClusterId(id, file); !valid.ok()) {
    return InvalidArgument(valid.message() +
                           ": the file is damaged or was edited, so the task files here cannot "
                           "be told apart by cluster. Remove it to keep them as the files of "
                           "the cluster this agent registers with next");
  }
  return id;
}

Status ClusterIdentity::Record(const std::string& id) const {
  GS_RETURN_IF_ERROR(ValidateClusterId(id, "cluster id to record"));
  const std::string file = path();
  const std::string tmp = file + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("create", tmp);
  const std::string text = id + "\n";
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool synced = written && fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  errno = saved;
  if (!synced) {
    unlink(tmp.c_str());
    return Errno("write", tmp);
  }
  if (rename(tmp.c_str(), file.c_str()) != 0) return Errno("rename to", file);
  return SyncDirectory(data_dir_);
}

StatusOr<int> ClusterIdentity::ArchiveTaskFiles(const std::string& old_id) const {
  GS_RETURN_IF_ERROR(ValidateClusterId(old_id, "cluster id to archive"));  // a path component
  const std::string base = data_dir_ + "/clusters/" + old_id;
  int moved = 0;
  for (const char* sub : {"logs", "journal"}) {
    GS_RETURN_IF_ERROR(EnsurePrivateDir(base + "/" + sub, "data-dir"));
    GS_ASSIGN_OR_RETURN(const int n, MoveEntries(sub, base + "/" + sub));
    moved += n;
    GS_RETURN_IF_ERROR(SyncDirectory(data_dir_ + "/" + sub));
    GS_RETURN_IF_ERROR(SyncDirectory(base + "/" + sub));
  }
  return moved;
}

StatusOr<int> ClusterIdentity::MoveEntries(const std::string& sub, const std::string& to) const {
  const std::string from = data_dir_ + "/" + sub;
  GS_ASSIGN_OR_RETURN(const std::vector<std::string> names,
                      ListNames(from, sub == "journal" ? "lock" : ""));
  int moved = 0;
  for (const std::string& name : names) {
    const std::string src = from + "/" + name;
    std::string dst = to + "/" + name;
    // Never over a file of an earlier archive of the same cluster.
    for (int i = 1; renameat2(AT_FDCWD, src.c_str(), AT_FDCWD, dst.c_str(), RENAME_NOREPLACE) != 0;
         ++i) {
      if (errno != EEXIST || i > 1000) return Errno("move " + src + " to", dst);
      dst = to + "/" + name + "." + std::to_string(i);
    }
    ++moved;
  }
  return moved;
}

}  // namespace gpusched::agent
