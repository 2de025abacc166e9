#pragma once
// GpuHandover: a preemptor starts on its GPUs only once the task it preempts has exited, so
// the two never hold one GPU's memory at once (issue 40: split out of Agent::Impl). A GPU
// task told to stop (a kill in its grace period) is stopping until its exit; an assignment
// naming one of its GPUs waits here, once however often the server repeats it, and an exit
// releases, in the order they came, the waiting assignments that no stopping task holds a
// GPU of any more. Assignments on other GPUs never wait.
//
// Thread-safety: none of its own. It shares its owner's mutex: every method REQUIRES that
// mutex held, and `gpus_of` is called under it.

#include <functional>
#include <optional>
#include <set>
#include <vector>

#include "agent/task_executor.h"
#include "gpusched/v1/gpusched.pb.h"

namespace gpusched::agent {

class GpuHandover {
 public:
  // The GPUs a task was given (GpuMonitor::GpusOf); empty for a task without GPUs.
  using GpusOf = std::function<std::vector<int>(const TaskKey&)>;

  explicit GpuHandover(GpusOf gpus_of) : gpus_of_(std::move(gpus_of)) {}

  // A kill of `task`. True when it is an assignment waiting here: dropped, it never runs
  // (nothing to kill). Otherwise, when it holds GPUs, it is stopping until OnExit.
  bool OnKill(const TaskKey& task);
  // The stopping task that holds one of `a`'s GPUs, if any: `a` then waits here (once).
  std::optional<TaskKey> Defer(const ::gpusched::v1::Assign& a);
  // `task` exited: it stops no more. Returns the waiting assignments free to start now, in
  // the order they came; they wait no more.
  std::vector<::gpusched::v1::Assign> OnExit(const TaskKey& task);
  // `task` exited, and what waits stays waiting (issue 39: the old cluster's task; what
  // waits was cleared with it).
  void Forget(const TaskKey& task) { stopping_.erase(task); }
  // Drops every waiting assignment (never started: nothing to stop).
  void ClearWaiting() { waiting_.clear(); }
  // The waiting assignments, in order: still the agent's (heartbeats, registrations).
  std::vector<TaskKey> Waiting() const;

 private:
  std::optional<TaskKey> StoppingOnGpusOf(const ::gpusched::v1::Assign& a) const;

  GpusOf gpus_of_;
  std::set<TaskKey> stopping_;
  std::vector<::gpusched::v1::Assign> waiting_;
};

}  // namespace gpusched::agent
