#include "agent/journal.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gpusched::agent {
namespace {

std::string Name(const TaskKey& key, const char* suffix) {
  char buf[64];
  journal::RecordName(buf, sizeof buf, key.first, key.second, suffix);
  return buf;
}

// Reads a record; NotFound when absent.
StatusOr<std::string> Read(const std::string& dir, const TaskKey& key, const char* suffix) {
  char buf[4096];
  const std::string name = Name(key, suffix);
  if (journal::ReadRecord(dir.c_str(), name.c_str(), buf, sizeof buf) < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound("journal: no record " + dir + "/" + name);
    return DataLoss("journal: cannot read " + dir + "/" + name + ": " + std::strerror(err));
  }
  return std::string(buf);
}

}  // namespace

StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return FailedPrecondition("journal: cannot create " + dir + ": " + ec.message() +
                              " (give the agent a writable --data-dir)");
  }
  const std::string lock_path = dir + "/lock";
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return FailedPrecondition("journal: " + dir + " is not writable (" + lock_path + ": " +
                              std::strerror(errno) + "); give the agent a writable --data-dir");
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) {
      return FailedPrecondition("journal: " + dir +
                                " is in use by another agent; give each agent its own "
                                "--data-dir");
    }
    return FailedPrecondition("journal: cannot lock " + lock_path + ": " + std::strerror(err));
  }
  return std::unique_ptr<Journal>(new Journal(dir, fd));
}

Journal::~Journal() { close(lock_fd_); }  // also releases the flock

StatusOr<std::map<TaskKey, Journal::Entry>> Journal::List() const {
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) {
    return DataLoss("journal: cannot list " + dir_ + ": " + std::strerror(errno));
  }
  std::map<TaskKey, Entry> out;
  while (const dirent* e = readdir(d)) {
    unsigned long long id = 0;
    long long attempt = 0;
    if (journal::ParseRecordName(e->d_name, journal::kRunSuffix, &id, &attempt)) {
      out[{id, attempt}].run = true;
    } else if (journal::ParseRecordName(e->d_name, journal::kExitSuffix, &id, &attempt)) {
      out[{id, attempt}].exit = true;
    }
  }
  closedir(d);
  return out;
}

StatusOr<journal::RunRecord> Journal::ReadRun(const TaskKey& key) const {
  GS_ASSIGN_OR_RETURN(std::string text, Read(dir_, key, journal::kRunSuffix));
  journal::RunRecord r;
  if (!journal::ParseRun(text.c_str(), &r)) {
    return DataLoss("journal: " + dir_ + "/" + Name(key, journal::kRunSuffix) + " is corrupt");
  }
  return r;
}

StatusOr<TaskExit> Journal::ReadExit(const TaskKey& key) const {
  journal::ExitRecord r;
  StatusOr<std::string> text = Read(dir_, key, journal::kExitSuffix);
  if (text.ok()) {
    if (!journal::ParseExit(text->c_str(), &r)) {
      return DataLoss("journal: " + dir_ + "/" + Name(key, journal::kExitSuffix) +
                      " is corrupt");
    }
    return TaskExit{key.first, key.second, r.exit_code, r.reason, r.finished_ms, r.permanent};
  }
  if (text.status().code() != StatusCode::kNotFound) return text.status();
  // A shim that died between appending its exit lines and renaming the record.
  StatusOr<std::string> run = Read(dir_, key, journal::kRunSuffix);
  if (run.ok() && journal::ParseExit(run->c_str(), &r)) {
    return TaskExit{key.first, key.second, r.exit_code, r.reason, r.finished_ms, r.permanent};
  }
  return text.status();
}

Status Journal::WriteExit(const TaskExit& e, TimeMs finished_ms) {
  journal::ExitRecord r;
  r.exit_code = e.exit_code;
  std::strncpy(r.reason, e.reason.c_str(), sizeof r.reason - 1);
  r.finished_ms = finished_ms;
  r.permanent = e.permanent;
  char text[512], error[512] = "journal: record too long";
  const size_t len = journal::FormatExit(r, text, sizeof text);
  const std::string name = Name({e.id, e.attempt}, journal::kExitSuffix);
  if (len == 0 ||
      !journal::WriteRecordAtomic(dir_.c_str(), name.c_str(), text, len, true, error,
                                  sizeof error)) {
    return Unavailable(error);
  }
  return Status::Ok();
}

void Journal::Remove(const TaskKey& key) {
  // The .run record first: an agent that dies in between leaves the exit alone, which the
  // next agent reports again (a duplicate the server ignores), never a .run without its
  // .exit, which would read as a lost task.
  for (const char* suffix : {journal::kRunSuffix, journal::kExitSuffix}) {
    const std::string path = dir_ + "/" + Name(key, suffix);
    unlink(path.c_str());
    unlink((path + journal::kTempSuffix).c_str());
  }
}

}  // namespace gpusched::agent
