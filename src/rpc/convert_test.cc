#include "rpc/convert.h"

#include <gtest/gtest.h>

#include <limits>

#include "rpc/grpc_status.h"

namespace gpusched::rpc {
namespace {

v1::TaskSpec Valid() {
  v1::TaskSpec p;
  p.set_name("train");
  p.set_gpus(2);
  p.set_gpu_mem_mib(6144);
  p.set_cpu_milli(2000);
  p.set_max_retries(1);
  p.set_time_limit_ms(60'000);
  p.set_heartbeat_timeout_ms(5'000);
  p.set_workdir("/home/u/proj");
  p.add_command("python");
  p.add_command("train.py");
  (*p.mutable_env())["A"] = "1";
  v1::Toleration* t = p.add_tolerations();
  t->set_key("gpu");
  t->set_exists(true);
  t->set_effect("NoSchedule");
  return p;
}

// A gang's and a priority class's fields survive the trip; absent ones stay absent.
TEST(ConvertTest, GangAndPriorityFieldsRoundTrip) {
  v1::TaskSpec p = Valid();
  p.set_nodes(4);
  p.set_gang_timeout_ms(600'000);
  p.set_priority_class("high");
  p.set_preemptible(false);
  p.set_grace_ms(5'000);
  auto s = TaskSpecFromProto(p);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->nodes, 4);
  EXPECT_EQ(s->tasks_per_node, 1);
  EXPECT_EQ(s->gang_timeout_ms, 600'000);
  EXPECT_EQ(s->priority_class, "high");
  EXPECT_FALSE(s->preemptible);
  EXPECT_EQ(s->grace_ms, 5'000);
  v1::TaskSpec back;
  TaskSpecToProto(*s, &back);
  EXPECT_EQ(back.SerializeAsString(), p.SerializeAsString());
  auto plain = TaskSpecFromProto(Valid());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->nodes, 1);
  EXPECT_TRUE(plain->preemptible);
  EXPECT_FALSE(plain->grace_ms.has_value());
}

TEST(ConvertTest, TaskSpecRoundTrips) {
  auto s = TaskSpecFromProto(Valid());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->gpus, 2);
  EXPECT_EQ(s->gpu_mem_mib, 6144);
  EXPECT_EQ(s->resources.cpu_milli, 2000);
  EXPECT_EQ(s->max_retries, 1);
  EXPECT_FALSE(s->duration_ms.has_value());
  EXPECT_EQ(s->time_limit_ms, 60'000);
  EXPECT_EQ(s->heartbeat_timeout_ms, 5'000);
  EXPECT_EQ(s->workdir, "/home/u/proj");
  EXPECT_EQ(s->command, (std::vector<std::string>{"python", "train.py"}));
  ASSERT_EQ(s->tolerations.size(), 1u);
  EXPECT_TRUE(s->tolerations[0].has_effect);
  v1::TaskSpec back;
  TaskSpecToProto(*s, &back);
  EXPECT_EQ(back.SerializeAsString(), Valid().SerializeAsString());
}

TEST(ConvertTest, BadFieldsAreNamed) {
  v1::TaskSpec p = Valid();
  p.clear_command();
  EXPECT_NE(TaskSpecFromProto(p).status().message().find("command"), std::string::npos);
  p = Valid();
  p.mutable_tolerations(0)->set_effect("Sometimes");
  auto s = TaskSpecFromProto(p);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("tolerations[0]"), std::string::npos);
  p = Valid();
  (*p.mutable_env())["A=B"] = "x";
  EXPECT_NE(TaskSpecFromProto(p).status().message().find("env"), std::string::npos);
  p = Valid();
  p.set_workdir("proj");  // the CLI sends an absolute path; another client must too
  EXPECT_NE(TaskSpecFromProto(p).status().message().find("workdir"), std::string::npos);
  EXPECT_EQ(TaskStateFromName("done", "state").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*TaskStateFromName("running", "state"), core::TaskState::kRunning);
  // A registering node's name follows the agent's own rule (that of its certificate).
  v1::RegisterNode reg;
  reg.add_gpus()->set_total_mib(1024);
  for (const std::string& bad : {std::string(), std::string("bad name!"), std::string("-dash"),
                                 std::string(254, 'a')}) {
    reg.set_name(bad);
    auto n = NodeSpecFromProto(reg);
    EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(n.status().message().starts_with("register.name: ")) << n.status().message();
  }
  // Names an agent of an earlier version may have registered with stay valid: a long host
  // name, or one certs init keeps for itself (plaintext needs no certificate).
  for (const std::string& good : {std::string("gpu-1.rack2"), std::string("server"),
                                  std::string(100, 'a') + ".example.com"}) {
    reg.set_name(good);
    EXPECT_TRUE(NodeSpecFromProto(reg).ok()) << good;
  }
}

// started_ms is the current attempt's start: none while a requeued task waits (its elapsed
// time grew from its first start while it was pending), its last start once it ends.
TEST(ConvertTest, StartedIsTheCurrentAttemptsStart) {
  using core::TaskState;
  core::Task t;
  t.id = TaskId(3);
  t.history = {{10, TaskState::kPending, ""},  {20, TaskState::kAssigned, ""},
               {30, TaskState::kRunning, ""},  {40, TaskState::kPreempted, ""}};
  const auto started = [&] {
    v1::Task p;
    TaskToProto(t, nullptr, false, &p);
    return p.started_ms();
  };
  EXPECT_EQ(started(), 0);  // preempted, waiting
  t.history.push_back({50, TaskState::kCancelled, ""});
  EXPECT_EQ(started(), 0);  // cancelled while it waited: it ran 10 ms, long before
  t.history.back() = {50, TaskState::kAssigned, ""};
  t.history.push_back({60, TaskState::kRunning, ""});
  EXPECT_EQ(started(), 60);
  t.history.push_back({70, TaskState::kSucceeded, ""});
  EXPECT_EQ(started(), 60);
  t.history.push_back({80, TaskState::kPending, ""});  // (a retry)
  EXPECT_EQ(started(), 0);
}

TEST(ConvertTest, FinishedTaskKeepsItsLastPlacement) {
  core::Task t;
  t.id = TaskId(7);
  t.state = core::TaskState::kSucceeded;
  t.exit_code = 0;
  core::Placement last;
  last.node = "n1";
  last.gpus = {3, 5};
  last.gpu_mem_mib = {1024, 1024};
  v1::Task p;
  TaskToProto(t, &last, false, &p);
  EXPECT_EQ(p.node(), "n1");
  EXPECT_EQ(p.gpus_size(), 2);
  EXPECT_EQ(p.gpus(1), 5);
  EXPECT_TRUE(p.has_exit_code());
  EXPECT_EQ(p.state(), "succeeded");
}

TEST(ConvertTest, StatusCodesSurviveTheWire) {
  for (Status s : {InvalidArgument("x"), NotFound("y"), FailedPrecondition("z"),
                   ResourceExhausted("w"), Unavailable("u")}) {
    EXPECT_EQ(FromGrpc(ToGrpc(s)), s);
  }
}

// Issue 40: {first: 0, last: INT64_MAX} overflowed the count (last - first + 1) into a
// negative number that passed the size check, and the server built tasks until it died.
TEST(ConvertTest, Issue40_ArrayRangeIsCheckedWithoutOverflow) {
  v1::IndexRange p;
  p.set_first(0);
  p.set_last(std::numeric_limits<int64_t>::max());
  auto r = rpc::IndexRangeFromProto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("array: 0-9223372036854775807"), std::string::npos)
      << r.status().message();
  p.set_last(core::kMaxArrayTasks);  // one index too many
  EXPECT_NE(rpc::IndexRangeFromProto(p).status().message().find("10001 indices"),
            std::string::npos);
  p.set_first(std::numeric_limits<int64_t>::min());
  p.set_last(std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(rpc::IndexRangeFromProto(p).ok());
  p.set_first(5);
  p.set_last(5 + core::kMaxArrayTasks - 1);
  auto ok = rpc::IndexRangeFromProto(p);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->count(), core::kMaxArrayTasks);
}

}  // namespace
}  // namespace gpusched::rpc
