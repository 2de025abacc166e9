#pragma once
// SplitSubmissions (issue 38): the submissions too large for one store commit (a job array
// of many tasks against etcd's 128 operations per transaction), admitted at once (consecutive
// ids) and stored as several parts, each whole in one commit, in order. It counts each one's
// stored tasks, so the control plane answers the submitter once every part is stored, or, when
// a part fails, says which tasks are stored (the parts before it) and withdraws the rest.
//
// Retries: the idempotency key names the first task, as for any submission, and each part i
// also stores PartKey(key, i) naming the part's last task, in the part's own commit. A retry
// with the key reads them (ReadStored) and finds every stored part: all of them answer the
// ids, fewer a FailedPrecondition naming the stored tasks (the answer of Submit can say all
// or nothing, so it says so in words).
//
// Thread-safety: none. ControlPlane calls it under its lock (ControlPlane::mu_); ReadStored
// reads the store only.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "store/state_store.h"

namespace gpusched::server {

class SplitSubmissions {
 public:
  struct Split {
    TaskId first;
    size_t count = 0;   // tasks in all
    size_t stored = 0;  // tasks stored so far (the first `stored`: parts land in order)
  };

  // The key of part `part` (1, 2, ...) of a submission keyed `key`. Its separator (0x1f) is
  // one a submitted key may not hold (ValidKey).
  static std::string PartKey(const std::string& key, size_t part);
  // InvalidArgument naming `idempotency_key` for a key holding the part separator.
  static Status ValidKey(const std::string& key);
  // What the store holds for `key` of a submission of `n` tasks: none, or its first task when
  // all are stored. A split submission stored in part sets `*partly` (its answer) and
  // returns none. Errors are the store's.
  static StatusOr<std::optional<uint64_t>> ReadStored(store::StateStore& store,
                                                      const std::string& key, size_t n,
                                                      std::optional<Status>* partly);
  // The answer of a submission of `count` tasks from `first` of which the first `stored`
  // (> 0) are stored and the rest were withdrawn for `why`.
  static Status Partly(TaskId first, size_t count, size_t stored, const std::string& why);

  void Add(TaskId first, size_t count) { splits_[first] = Split{first, count, 0}; }
  // The split submission holding task `id`; null when none does.
  Split* Find(TaskId id);
  void Erase(TaskId first) { splits_.erase(first); }
  size_t size() const { return splits_.size(); }
  // Every split submission not answered yet; none is kept.
  std::vector<Split> TakeAll();

 private:
  std::map<TaskId, Split> splits_;  // by first task
};

}  // namespace gpusched::server
