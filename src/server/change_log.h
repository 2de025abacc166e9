#pragma once
// ChangeLog: which tasks changed in which version, for Watch and the REST event stream
// (issue 40: split out of ControlPlane). Each flush that changed tasks makes one new version;
// a reader asks what changed after the version it saw. The log keeps the last `capacity`
// entries: a reader further behind is told to read everything.
//
// Thread-safety: none (the control plane's mutex guards it).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace gpusched::server {

class ChangeLog {
 public:
  explicit ChangeLog(size_t capacity = 65'536) : capacity_(capacity) {}

  // Task `id` changed in the version being built.
  void Add(uint64_t id);
  // Ends the version being built: true (and a new version) when a task changed in it.
  bool Seal();
  uint64_t version() const { return version_; }
  // The tasks that changed after version `since`, ascending, each once; `everything` true
  // when the log no longer reaches back to `since` (the ids are then only the latest).
  std::vector<uint64_t> Since(uint64_t since, bool& everything) const;

 private:
  size_t capacity_;
  uint64_t version_ = 0;
  std::deque<std::pair<uint64_t, uint64_t>> log_;  // (version, task id), oldest first
};

}  // namespace gpusched::server
