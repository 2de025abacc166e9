#include "store/file_identity.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace gpusched::store {

StatusOr<FileIdentity> FileIdentity::Record(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return Unavailable("store: cannot stat " + path + ": " + std::strerror(errno));
  }
  return FileIdentity(path, st.st_dev, st.st_ino);
}

FileIdentity::FileIdentity(const FileIdentity& other)
    : path_(other.path_), dev_(other.dev_), ino_(other.ino_), lost_(other.lost_.load()) {
  std::lock_guard<std::mutex> lock(other.mu_);
  why_ = other.why_;
}

Status FileIdentity::Check() const {
  if (!lost_.load(std::memory_order_acquire)) {
    struct stat st {};
    std::string happened;
    if (stat(path_.c_str(), &st) != 0) {
      happened = errno == ENOENT ? "was removed" : std::string("cannot be read (") +
                                                       std::strerror(errno) + ")";
    } else if (st.st_dev != dev_ || st.st_ino != ino_) {
      happened = "was replaced by another file";
    }
    if (happened.empty()) return Status::Ok();
    std::lock_guard<std::mutex> lock(mu_);
    if (!lost_.load()) {
      why_ = "store file " + path_ + " " + happened +
             " since the server opened it: this server takes no more writes (nothing "
             "acknowledged from now on would survive a restart). Put the file back, or "
             "restore it from a backup (gpusched admin restore), and restart the server";
      logging::Error("store", why_);
      lost_.store(true, std::memory_order_release);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  return FailedPrecondition(why_);
}

}  // namespace gpusched::store
