#pragma once
// Journal: the agent's side of the task journal in <data-dir>/journal (journal_record.h
// holds the format the shims write). While an agent runs, its journal is locked (flock on
// journal/lock): two agents, in one process or two, never adopt the same tasks, and the
// lock goes with the process, so an agent killed with -9 does not keep it.
//
// Thread-safety: every method but the destructor may be called from any thread.

#include <map>
#include <memory>
#include <string>

#include "agent/journal_record.h"
#include "agent/task_executor.h"
#include "base/status.h"

namespace gpusched::agent {

class Journal {
 public:
  // Creates `dir` when needed and locks it. Every failure names the folder and what to do:
  // it cannot be created, it is not writable, another agent holds it.
  static StatusOr<std::unique_ptr<Journal>> Open(const std::string& dir);
  ~Journal();  // releases the lock
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  const std::string& dir() const { return dir_; }

  // Which records an (id, attempt) has.
  struct Entry {
    bool run = false;
    bool exit = false;
  };
  // Every (id, attempt) with a record. Files that are not records are skipped.
  StatusOr<std::map<TaskKey, Entry>> List() const;
  // NotFound when there is no such record; DataLoss when it cannot be read or parsed.
  StatusOr<journal::RunRecord> ReadRun(const TaskKey& key) const;
  // The .exit record or, failing that, complete exit lines in the .run record.
  StatusOr<TaskExit> ReadExit(const TaskKey& key) const;
  // Writes (replaces) the exit record of `e`, fsynced. `finished_ms`: Unix time.
  Status WriteExit(const TaskExit& e, TimeMs finished_ms);
  // Deletes the records of `key` and any temp files they left. Missing ones are fine.
  void Remove(const TaskKey& key);

 private:
  Journal(std::string dir, int lock_fd) : dir_(std::move(dir)), lock_fd_(lock_fd) {}
  const std::string dir_;
  const int lock_fd_;
};

}  // namespace gpusched::agent
