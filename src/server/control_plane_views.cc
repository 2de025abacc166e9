// ControlPlane: read-only views for the REST API and the dashboard. Each is taken under mu_
// once, so what it shows is one consistent moment (a GPU's bar and the tasks splitting it
// agree).

#include <algorithm>

#include "server/control_plane.h"

namespace gpusched::server {

QueuesView ControlPlane::Queues(size_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  QueuesView v;
  auto fill = [&](const std::vector<TaskId>& order, std::vector<QueuedTask>& out) {
    for (TaskId id : order) {
      if (out.size() == limit) break;
      const core::Task* t = sched_->GetTask(id);
      if (t == nullptr) continue;
      QueuedTask q;
      q.task = ViewOf(*t);
      StatusOr<core::Explanation> e = sched_->Explain(id);
      q.why = e.ok() ? e->summary : t->reason;
      out.push_back(std::move(q));
    }
  };
  const std::vector<TaskId> main = sched_->MainQueueOrder();
  const std::vector<TaskId> failure = sched_->FailureQueueOrder();
  v.main_size = main.size();
  v.failure_size = failure.size();
  fill(main, v.main);
  fill(failure, v.failure);
  return v;
}

ClusterView ControlPlane::Cluster() {
  std::lock_guard<std::mutex> lock(mu_);
  ClusterView v;
  std::map<std::string, NodeView> sorted;
  for (const core::NodeState& n : sched_->cluster().nodes()) sorted[n.name] = *NodeViewOf(n.name);
  for (auto& [name, n] : sorted) {
    v.nodes.push_back(std::move(n));
    for (TaskId id : sched_->TasksOnNode(name)) {
      v.active.push_back(ViewOf(*sched_->GetTask(id)));
    }
  }
  std::sort(v.active.begin(), v.active.end(),
            [](const TaskView& a, const TaskView& b) { return a.id() < b.id(); });
  return v;
}

}  // namespace gpusched::server
