#include "agent/agent_messages.h"

#include <unistd.h>

#include <algorithm>

#include "rpc/convert.h"

namespace gpusched::agent {

namespace v1 = ::gpusched::v1;

namespace {

v1::TaskRef::ExecutorStatus ToProto(TaskHealth h) {
  switch (h) {
    case TaskHealth::kStopped: return v1::TaskRef::STOPPED;
    case TaskHealth::kHeartbeatStale: return v1::TaskRef::HEARTBEAT_STALE;
    case TaskHealth::kRunning: break;
  }
  return v1::TaskRef::RUNNING;
}

void AddRefs(const std::vector<TaskKey>& tasks,
             google::protobuf::RepeatedPtrField<v1::TaskRef>* out) {
  out->Reserve(static_cast<int>(tasks.size()));
  for (const auto& [id, attempt] : tasks) {
    v1::TaskRef* r = out->Add();
    r->set_id(id);
    r->set_attempt(attempt);
  }
}

}  // namespace

core::Resources HostCapacity() {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return core::Resources{std::max(1L, cpus) * 1000, static_cast<int64_t>(pages) * page / (1 << 20)};
}

v1::AgentMessage RegistrationMessage(const NodeFacts& facts, const std::vector<TaskKey>& running,
                                     const std::string& cluster_id) {
  v1::AgentMessage m;
  v1::RegisterNode* r = m.mutable_register_();
  rpc::NodeSpecToProto(facts.spec, r);
  r->set_agent_instance(facts.instance);
  r->set_simulated(facts.simulated);
  AddRefs(running, r->mutable_running());
  r->set_cluster_id(cluster_id);
  return m;
}

v1::AgentMessage NodeHeartbeatMessage(const std::vector<MiB>& gpu_free_mib,
                                      const std::vector<core::GpuHealthView>& health,
                                      const std::vector<TaskKey>& running) {
  v1::AgentMessage m;
  v1::NodeHeartbeat* hb = m.mutable_heartbeat();
  for (MiB f : gpu_free_mib) hb->add_gpu_free_mib(f);
  for (const core::GpuHealthView& view : health) {
    v1::GpuHealth* h = hb->add_gpu_health();
    h->set_unhealthy(!view.healthy);
    h->set_last_error(view.last_error);
  }
  AddRefs(running, hb->mutable_running());
  return m;
}

v1::AgentMessage TaskHeartbeatsMessage(const std::vector<TaskKey>& running,
                                       const std::map<TaskKey, GpuMonitor::Use>& use,
                                       const std::map<TaskKey, TaskObservation>& seen,
                                       bool with_executor_status) {
  v1::AgentMessage m;
  auto* tasks = m.mutable_task_heartbeats()->mutable_tasks();
  AddRefs(running, tasks);
  for (v1::TaskRef& r : *tasks) {
    const TaskKey key{r.id(), r.attempt()};
    if (auto u = use.find(key); u != use.end()) {
      r.set_gpu_util(u->second.util);
      r.set_gpu_mem_used_mib(u->second.mem_mib);
    }
    if (!with_executor_status) continue;  // no process to look at
    auto o = seen.find(key);
    const TaskHealth health = o == seen.end() ? TaskHealth::kRunning : o->second.health;
    r.set_executor_status(ToProto(health));
    if (health != TaskHealth::kRunning) r.set_executor_detail(o->second.detail);
  }
  return m;
}

}  // namespace gpusched::agent
