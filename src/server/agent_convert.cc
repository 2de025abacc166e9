#include "server/agent_convert.h"

#include <algorithm>

#include "rpc/convert.h"

namespace gpusched::server {
namespace {

core::ExecutorStatus ExecutorStatusFromProto(v1::TaskRef::ExecutorStatus s) {
  switch (s) {
    case v1::TaskRef::RUNNING: return core::ExecutorStatus::kRunning;
    case v1::TaskRef::STOPPED: return core::ExecutorStatus::kStopped;
    case v1::TaskRef::HEARTBEAT_STALE: return core::ExecutorStatus::kHeartbeatStale;
    default: return core::ExecutorStatus::kUnreported;  // older agents, unknown values
  }
}

TaskReport::PeakSource PeakSourceFromProto(v1::TaskStatus::PeakSource s) {
  switch (s) {
    case v1::TaskStatus::PEAK_AGENT_MEASURED: return TaskReport::PeakSource::kAgentMeasured;
    case v1::TaskStatus::PEAK_TASK_WRITTEN: return TaskReport::PeakSource::kTaskWritten;
    default: return TaskReport::PeakSource::kUnknown;
  }
}

v1::TaskStatus::PeakSource PeakSourceToProto(TaskReport::PeakSource s) {
  switch (s) {
    case TaskReport::PeakSource::kAgentMeasured: return v1::TaskStatus::PEAK_AGENT_MEASURED;
    case TaskReport::PeakSource::kTaskWritten: return v1::TaskStatus::PEAK_TASK_WRITTEN;
    case TaskReport::PeakSource::kUnknown: break;
  }
  return v1::TaskStatus::PEAK_UNKNOWN;
}

core::NodeHeartbeat HeartbeatFromProto(const v1::NodeHeartbeat& p) {
  core::NodeHeartbeat hb;
  hb.gpu_free_mib.assign(p.gpu_free_mib().begin(), p.gpu_free_mib().end());
  hb.running.reserve(static_cast<size_t>(p.running_size()));
  for (const v1::TaskRef& r : p.running()) hb.running.emplace_back(TaskId(r.id()), r.attempt());
  hb.gpu_health.reserve(static_cast<size_t>(p.gpu_health_size()));
  for (const v1::GpuHealth& g : p.gpu_health()) {
    hb.gpu_health.push_back({!g.unhealthy(), g.last_error()});
  }
  return hb;
}

TaskBeats TaskBeatsFromProto(const v1::TaskHeartbeats& p) {
  TaskBeats beats;
  beats.tasks.reserve(static_cast<size_t>(p.tasks_size()));
  for (const v1::TaskRef& r : p.tasks()) {
    TaskBeat b{TaskId(r.id()), r.attempt(), std::nullopt,
               {ExecutorStatusFromProto(r.executor_status()), r.executor_detail()}};
    if (r.has_gpu_util()) {
      b.usage = core::GpuUsage{std::clamp(r.gpu_util(), 0, 100),
                               std::max<int64_t>(r.gpu_mem_used_mib(), 0)};
    }
    beats.tasks.push_back(std::move(b));
  }
  return beats;
}

void AssignmentToProto(TaskAssignment&& a, v1::Assign* p) {
  p->set_id(a.id.value());
  p->set_attempt(a.attempt);
  p->set_name(std::move(a.name));
  for (int g : a.gpus) p->add_gpus(g);
  for (MiB mib : a.gpu_mem_mib) p->add_gpu_mem_mib(mib);
  for (std::string& c : a.command) p->add_command(std::move(c));
  for (auto& [k, v] : a.env) (*p->mutable_env())[k] = std::move(v);
  p->set_rank(a.rank);
  if (a.duration_ms) p->set_duration_ms(*a.duration_ms);
  if (a.heartbeat_timeout_ms) p->set_heartbeat_timeout_ms(*a.heartbeat_timeout_ms);
  if (a.stop_signal) p->set_stop_signal(*a.stop_signal);
  p->set_workdir(std::move(a.workdir));
  p->set_cgroup_mem_mib(a.cgroup_mem_mib);
  p->set_cgroup_cpu_milli(a.cgroup_cpu_milli);
  p->set_user(std::move(a.user));
  if (a.submitted_by_root) p->set_submitted_by_root(true);
}

}  // namespace

StatusOr<AgentRegistration> RegistrationFromProto(const v1::RegisterNode& p) {
  AgentRegistration r;
  GS_ASSIGN_OR_RETURN(r.spec, rpc::NodeSpecFromProto(p));
  r.instance = p.agent_instance();
  r.cluster_id = p.cluster_id();
  r.running.reserve(static_cast<size_t>(p.running_size()));
  for (const v1::TaskRef& t : p.running()) r.running.emplace_back(TaskId(t.id()), t.attempt());
  r.finished.reserve(static_cast<size_t>(p.finished_size()));
  for (const v1::TaskStatus& st : p.finished()) r.finished.push_back(TaskReportFromProto(st));
  return r;
}

TaskReport TaskReportFromProto(const v1::TaskStatus& p) {
  TaskReport r;
  r.id = TaskId(p.id());
  r.attempt = p.attempt();
  r.kind = p.kind() == v1::TaskStatus::STARTED ? TaskReport::Kind::kStarted
                                               : TaskReport::Kind::kFinished;
  r.exit_code = p.exit_code();
  r.peak_gpu_mem_mib = p.peak_gpu_mem_mib();
  r.peak_source = PeakSourceFromProto(p.peak_source());
  r.reason = p.reason();
  r.gpu_mem_exceeded = p.gpu_mem_exceeded();
  r.permanent = p.permanent();
  r.out_of_memory = p.out_of_memory();
  r.finished_ms = p.finished_ms();
  r.ended_ago_ms = p.ended_ago_ms();
  return r;
}

AgentReport AgentReportFromProto(const v1::AgentMessage& m) {
  switch (m.msg_case()) {
    case v1::AgentMessage::kHeartbeat: return HeartbeatFromProto(m.heartbeat());
    case v1::AgentMessage::kTaskHeartbeats: return TaskBeatsFromProto(m.task_heartbeats());
    case v1::AgentMessage::kStatus: return TaskReportFromProto(m.status());
    default: return std::monostate{};  // a registration again, or nothing
  }
}

v1::TaskStatus TaskReportToProto(const TaskReport& r) {
  v1::TaskStatus p;
  p.set_id(r.id.value());
  p.set_attempt(r.attempt);
  p.set_kind(r.kind == TaskReport::Kind::kStarted ? v1::TaskStatus::STARTED
                                                  : v1::TaskStatus::FINISHED);
  p.set_exit_code(r.exit_code);
  p.set_peak_gpu_mem_mib(r.peak_gpu_mem_mib);
  p.set_peak_source(PeakSourceToProto(r.peak_source));
  p.set_reason(r.reason);
  p.set_gpu_mem_exceeded(r.gpu_mem_exceeded);
  p.set_permanent(r.permanent);
  p.set_out_of_memory(r.out_of_memory);
  p.set_finished_ms(r.finished_ms);
  p.set_ended_ago_ms(r.ended_ago_ms);
  return p;
}

v1::ServerMessage AgentOrderToProto(AgentOrder&& order) {
  v1::ServerMessage m;
  if (TaskAssignment* a = std::get_if<TaskAssignment>(&order)) {
    AssignmentToProto(std::move(*a), m.mutable_assign());
  } else if (TaskKill* k = std::get_if<TaskKill>(&order)) {
    v1::Kill* p = m.mutable_kill();
    p->set_id(k->id.value());
    p->set_attempt(k->attempt);
    p->set_reason(std::move(k->reason));
    if (k->grace_ms) p->set_grace_ms(*k->grace_ms);
  } else if (const StatusAck* ack = std::get_if<StatusAck>(&order)) {
    m.mutable_ack()->set_id(ack->id.value());
    m.mutable_ack()->set_attempt(ack->attempt);
  }
  return m;
}

v1::RegisterNode RegistrationToProto(const AgentRegistration& r) {
  v1::RegisterNode p;
  rpc::NodeSpecToProto(r.spec, &p);
  p.set_agent_instance(r.instance);
  p.set_cluster_id(r.cluster_id);
  for (const auto& [id, attempt] : r.running) {
    v1::TaskRef* t = p.add_running();
    t->set_id(id.value());
    t->set_attempt(attempt);
  }
  for (const TaskReport& f : r.finished) *p.add_finished() = TaskReportToProto(f);
  return p;
}

}  // namespace gpusched::server
