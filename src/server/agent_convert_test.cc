// Issue 40: the agent door's conversions (agent_convert.h): every field the control plane
// reads survives the trip from the gpusched.v1 message and back, and a bad value is refused
// naming its field and the value.

#include "server/agent_convert.h"

#include <gtest/gtest.h>

#include <map>
#include <variant>

namespace gpusched::server {
namespace {

TaskReport FullExit() {
  TaskReport r;
  r.id = TaskId(42);
  r.attempt = 3;
  r.kind = TaskReport::Kind::kFinished;
  r.exit_code = 137;
  r.peak_gpu_mem_mib = 12'345;
  r.peak_source = TaskReport::PeakSource::kTaskWritten;
  r.reason = "killed: out of memory";
  r.gpu_mem_exceeded = true;
  r.permanent = true;
  r.out_of_memory = true;
  r.finished_ms = 1'700'000'000'123;
  r.ended_ago_ms = 4'500;
  return r;
}

void ExpectSame(const TaskReport& a, const TaskReport& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.attempt, b.attempt);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(a.peak_gpu_mem_mib, b.peak_gpu_mem_mib);
  EXPECT_EQ(a.peak_source, b.peak_source);
  EXPECT_EQ(a.reason, b.reason);
  EXPECT_EQ(a.gpu_mem_exceeded, b.gpu_mem_exceeded);
  EXPECT_EQ(a.permanent, b.permanent);
  EXPECT_EQ(a.out_of_memory, b.out_of_memory);
  EXPECT_EQ(a.finished_ms, b.finished_ms);
  EXPECT_EQ(a.ended_ago_ms, b.ended_ago_ms);
}

AgentRegistration FullRegistration() {
  AgentRegistration r;
  r.spec.name = "gpu-7";
  r.spec.address = "10.0.0.7:7070";
  r.spec.capacity = {96'000, 512 * 1024};
  r.spec.gpus = {{"H100", 81'559}, {"H100", 81'559}};
  r.spec.labels = {{"rack", "r3"}, {"zone", "a"}};
  r.spec.taints = {{"dedicated", "ml", core::TaintEffect::kNoSchedule}};
  r.spec.topology.gpus = 2;
  r.spec.topology.links = {3, 3, 3, 3};
  r.spec.topology.numa = {0, 1};
  r.instance = "b7e1c0de";
  r.cluster_id = "0123456789abcdef0123456789abcdef";
  r.running = {{TaskId(5), 1}, {TaskId(9), 2}};
  TaskReport started;
  started.id = TaskId(11);
  started.attempt = 1;
  r.finished = {FullExit(), started};
  return r;
}

TEST(AgentConvertTest, Issue40_EveryFieldOfATaskStatusRoundTrips) {
  for (TaskReport::PeakSource source :
       {TaskReport::PeakSource::kUnknown, TaskReport::PeakSource::kAgentMeasured,
        TaskReport::PeakSource::kTaskWritten}) {
    TaskReport r = FullExit();
    r.peak_source = source;
    ExpectSame(TaskReportFromProto(TaskReportToProto(r)), r);
  }
  TaskReport started;
  started.id = TaskId(1);
  started.attempt = 2;
  const v1::TaskStatus p = TaskReportToProto(started);
  EXPECT_EQ(p.kind(), v1::TaskStatus::STARTED);
  ExpectSame(TaskReportFromProto(p), started);
}

TEST(AgentConvertTest, Issue40_EveryFieldOfARegistrationRoundTrips) {
  const AgentRegistration r = FullRegistration();
  StatusOr<AgentRegistration> back = RegistrationFromProto(RegistrationToProto(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->spec.name, r.spec.name);
  EXPECT_EQ(back->spec.address, r.spec.address);
  EXPECT_EQ(back->spec.capacity.cpu_milli, r.spec.capacity.cpu_milli);
  EXPECT_EQ(back->spec.capacity.mem_mib, r.spec.capacity.mem_mib);
  ASSERT_EQ(back->spec.gpus.size(), 2u);
  EXPECT_EQ(back->spec.gpus[1].model, "H100");
  EXPECT_EQ(back->spec.gpus[1].total_mib, 81'559);
  EXPECT_EQ(back->spec.labels, r.spec.labels);
  ASSERT_EQ(back->spec.taints.size(), 1u);
  EXPECT_EQ(back->spec.taints[0].key, "dedicated");
  EXPECT_EQ(back->spec.taints[0].value, "ml");
  EXPECT_EQ(back->spec.topology.gpus, 2);
  EXPECT_EQ(back->spec.topology.links, r.spec.topology.links);
  EXPECT_EQ(back->spec.topology.numa, r.spec.topology.numa);
  EXPECT_EQ(back->instance, r.instance);
  EXPECT_EQ(back->cluster_id, r.cluster_id);
  EXPECT_EQ(back->running, r.running);
  ASSERT_EQ(back->finished.size(), 2u);
  ExpectSame(back->finished[0], r.finished[0]);
  ExpectSame(back->finished[1], r.finished[1]);
}

TEST(AgentConvertTest, Issue40_ABadRegistrationIsRefusedNamingTheFieldAndTheValue) {
  v1::RegisterNode p = RegistrationToProto(FullRegistration());
  p.mutable_gpus(1)->set_total_mib(-5);
  StatusOr<AgentRegistration> r = RegistrationFromProto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("register.gpus[1].total_mib"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("-5"), std::string::npos) << r.status().message();

  p = RegistrationToProto(FullRegistration());
  p.mutable_taints(0)->set_effect("Sometimes");
  r = RegistrationFromProto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("register.taints[0].effect"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("Sometimes"), std::string::npos) << r.status().message();

  p = RegistrationToProto(FullRegistration());
  p.set_name("bad name/with slash");
  r = RegistrationFromProto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("register.name"), std::string::npos)
      << r.status().message();
}

TEST(AgentConvertTest, Issue40_HeartbeatsConvertWithTheirBoundsAndUnknownValuesAsBefore) {
  v1::AgentMessage m;
  v1::NodeHeartbeat* hb = m.mutable_heartbeat();
  hb->add_gpu_free_mib(1024);
  hb->add_gpu_free_mib(-1);
  v1::TaskRef* running = hb->add_running();
  running->set_id(3);
  running->set_attempt(2);
  hb->add_gpu_health();
  hb->add_gpu_health()->set_unhealthy(true);
  hb->mutable_gpu_health(1)->set_last_error("Xid 79");
  const AgentReport node = AgentReportFromProto(m);
  ASSERT_TRUE(std::holds_alternative<core::NodeHeartbeat>(node));
  const auto& n = std::get<core::NodeHeartbeat>(node);
  EXPECT_EQ(n.gpu_free_mib, (std::vector<MiB>{1024, -1}));
  EXPECT_EQ(n.running, (std::vector<RunningRef>{{TaskId(3), 2}}));
  ASSERT_EQ(n.gpu_health.size(), 2u);
  EXPECT_TRUE(n.gpu_health[0].healthy);
  EXPECT_FALSE(n.gpu_health[1].healthy);
  EXPECT_EQ(n.gpu_health[1].error, "Xid 79");

  m.Clear();
  v1::TaskRef* busy = m.mutable_task_heartbeats()->add_tasks();
  busy->set_id(4);
  busy->set_attempt(1);
  busy->set_gpu_util(250);          // clamped to 100
  busy->set_gpu_mem_used_mib(-7);   // clamped to 0
  busy->set_executor_status(v1::TaskRef::STOPPED);
  busy->set_executor_detail("stopped: all in state T");
  v1::TaskRef* quiet = m.mutable_task_heartbeats()->add_tasks();
  quiet->set_id(5);
  quiet->set_executor_status(static_cast<v1::TaskRef::ExecutorStatus>(77));  // a newer agent's
  const AgentReport tasks = AgentReportFromProto(m);
  ASSERT_TRUE(std::holds_alternative<TaskBeats>(tasks));
  const std::vector<TaskBeat>& beats = std::get<TaskBeats>(tasks).tasks;
  ASSERT_EQ(beats.size(), 2u);
  EXPECT_EQ(beats[0].id, TaskId(4));
  EXPECT_EQ(beats[0].attempt, 1);
  ASSERT_TRUE(beats[0].usage.has_value());
  EXPECT_EQ(beats[0].usage->util, 100);
  EXPECT_EQ(beats[0].usage->mem_used_mib, 0);
  EXPECT_EQ(beats[0].executor.status, core::ExecutorStatus::kStopped);
  EXPECT_EQ(beats[0].executor.detail, "stopped: all in state T");
  EXPECT_FALSE(beats[1].usage.has_value()) << "no GPU use reported";
  EXPECT_EQ(beats[1].executor.status, core::ExecutorStatus::kUnreported);

  m.Clear();
  *m.mutable_status() = TaskReportToProto(FullExit());
  const AgentReport status = AgentReportFromProto(m);
  ASSERT_TRUE(std::holds_alternative<TaskReport>(status));
  ExpectSame(std::get<TaskReport>(status), FullExit());

  m.Clear();
  m.mutable_register_()->set_name("again");  // only the first registration counts
  EXPECT_TRUE(std::holds_alternative<std::monostate>(AgentReportFromProto(m)));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(AgentReportFromProto(v1::AgentMessage())));
}

TEST(AgentConvertTest, Issue40_EveryFieldOfAnOrderReachesTheWire) {
  TaskAssignment a;
  a.id = TaskId(8);
  a.attempt = 2;
  a.name = "train";
  a.gpus = {0, 3};
  a.gpu_mem_mib = {20'000, 30'000};
  a.command = {"python", "train.py"};
  a.env = {{"RANK", "1"}, {"WORLD_SIZE", "2"}};
  a.rank = 1;
  a.duration_ms = 60'000;
  a.heartbeat_timeout_ms = 90'000;
  a.stop_signal = 10;
  a.workdir = "/data/run";
  a.cgroup_mem_mib = 65'536;
  a.cgroup_cpu_milli = 8'000;
  a.user = "alice";
  a.submitted_by_root = true;
  const v1::ServerMessage m = AgentOrderToProto(AgentOrder(a));
  ASSERT_TRUE(m.has_assign());
  const v1::Assign& p = m.assign();
  EXPECT_EQ(p.id(), 8u);
  EXPECT_EQ(p.attempt(), 2);
  EXPECT_EQ(p.name(), "train");
  EXPECT_EQ(std::vector<int>(p.gpus().begin(), p.gpus().end()), a.gpus);
  EXPECT_EQ(std::vector<MiB>(p.gpu_mem_mib().begin(), p.gpu_mem_mib().end()), a.gpu_mem_mib);
  EXPECT_EQ(std::vector<std::string>(p.command().begin(), p.command().end()), a.command);
  const std::map<std::string, std::string> env(p.env().begin(), p.env().end());
  EXPECT_EQ(env, a.env);
  EXPECT_EQ(p.rank(), 1);
  EXPECT_EQ(p.duration_ms(), 60'000);
  EXPECT_EQ(p.heartbeat_timeout_ms(), 90'000);
  EXPECT_EQ(p.stop_signal(), 10);
  EXPECT_EQ(p.workdir(), "/data/run");
  EXPECT_EQ(p.cgroup_mem_mib(), 65'536);
  EXPECT_EQ(p.cgroup_cpu_milli(), 8'000);
  EXPECT_EQ(p.user(), "alice");
  EXPECT_TRUE(p.submitted_by_root());
  // Unset optionals stay absent on the wire, as before.
  const v1::ServerMessage bare = AgentOrderToProto(TaskAssignment{});
  EXPECT_FALSE(bare.assign().has_duration_ms());
  EXPECT_FALSE(bare.assign().has_heartbeat_timeout_ms());

  const v1::ServerMessage kill = AgentOrderToProto(TaskKill{TaskId(8), 2, "preempted", 5'000});
  ASSERT_TRUE(kill.has_kill());
  EXPECT_EQ(kill.kill().id(), 8u);
  EXPECT_EQ(kill.kill().attempt(), 2);
  EXPECT_EQ(kill.kill().reason(), "preempted");
  ASSERT_TRUE(kill.kill().has_grace_ms());
  EXPECT_EQ(kill.kill().grace_ms(), 5'000);
  EXPECT_FALSE(AgentOrderToProto(TaskKill{TaskId(8), 2, "", std::nullopt}).kill().has_grace_ms())
      << "no grace: the agent's own";

  const v1::ServerMessage ack = AgentOrderToProto(StatusAck{TaskId(8), 2});
  ASSERT_TRUE(ack.has_ack());
  EXPECT_EQ(ack.ack().id(), 8u);
  EXPECT_EQ(ack.ack().attempt(), 2);
}

}  // namespace
}  // namespace gpusched::server
