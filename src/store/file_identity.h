#pragma once
// FileIdentity: notices that the file a store opened is no longer the file at its path
// (issue 39: `state.db` deleted or replaced under a running server). A process that keeps
// writing into an unlinked file acknowledges work that a restart will not find, and a new
// file at the path restarts task ids at 1; so the first check that finds the path gone or
// naming another file (another device or inode) fails, and every check after it fails the
// same way (sticky: a file put back at the path later is not the one this process wrote).
//
// Cost: one stat(2) per Check, no I/O of the file (a commit costs an fsync besides).
// Thread-safety: Check and Lost may be called from any thread.

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>

#include "base/status.h"

namespace gpusched::store {

class FileIdentity {
 public:
  // Records the device and inode now at `path`. REQUIRES: the caller has just opened `path`
  // (and holds it open), so that what is recorded is the file it writes. Unavailable when
  // `path` cannot be read.
  static StatusOr<FileIdentity> Record(const std::string& path);
  FileIdentity(const FileIdentity& other);
  FileIdentity& operator=(const FileIdentity&) = delete;

  // Ok while the file at the path is the one recorded. Otherwise FailedPrecondition, from
  // then on, naming the path, what happened and what to do.
  Status Check() const;
  // True once a Check failed.
  bool lost() const { return lost_.load(); }
  const std::string& path() const { return path_; }

 private:
  FileIdentity(std::string path, dev_t dev, ino_t ino) : path_(std::move(path)), dev_(dev), ino_(ino) {}

  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  mutable std::atomic<bool> lost_{false};
  mutable std::mutex mu_;  // guards why_
  mutable std::string why_;
};

}  // namespace gpusched::store
