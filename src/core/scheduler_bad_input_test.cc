// Bad input at the front door: each error names the field and the value, and the
// scheduler's state is unchanged.

#include <gtest/gtest.h>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SchedulerTest;
using testing::SharedTask;

class BadInputTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerTest::SetUp();
    AddNode(MakeNode("n1", 8, 80 * kGiB, "H100"));
    accepted_ = Submit(SharedTask(kGiB, "accepted"));
    sched_->Schedule();
    sched_->TakeActions();
    sched_->TakeChangedTasks();
  }

  // Submits `spec`, expects `code` with `fragment` in the message, and no state change.
  void ExpectRejected(const TaskSpec& spec, StatusCode code, const std::string& fragment) {
    const size_t tasks = sched_->Tasks().size();
    const size_t q = sched_->main_queue_size(), fq = sched_->failure_queue_size();
    const MiB allocated = sched_->cluster().node(0).gpu_allocated_mib;
    auto result = sched_->Submit(spec);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), code) << result.status().ToString();
    EXPECT_NE(result.status().message().find(fragment), std::string::npos)
        << "message: " << result.status().message() << "\nexpected: " << fragment;
    EXPECT_EQ(sched_->Tasks().size(), tasks);
    EXPECT_EQ(sched_->main_queue_size(), q);
    EXPECT_EQ(sched_->failure_queue_size(), fq);
    EXPECT_EQ(sched_->cluster().node(0).gpu_allocated_mib, allocated);
    EXPECT_TRUE(sched_->TakeChangedTasks().empty());
    EXPECT_EQ(T(accepted_).state, TaskState::kAssigned);
    ExpectInvariants();
  }

  TaskId accepted_;
};

TEST_F(BadInputTest, NegativeGpuMemory) {
  ExpectRejected(SharedTask(-5), StatusCode::kInvalidArgument, "gpu_mem: must be >= 0, got -5MiB");
}

TEST_F(BadInputTest, NegativeCpuAndMemory) {
  TaskSpec t = SharedTask(kGiB);
  t.resources.cpu_milli = -1;
  ExpectRejected(t, StatusCode::kInvalidArgument, "cpu: must be >= 0, got -1m");
  t.resources = {0, -2};
  ExpectRejected(t, StatusCode::kInvalidArgument, "mem: must be >= 0, got -2MiB");
}

// A job file's or REST body's node selector and tolerations follow the rules of --selector
// and --toleration (a selector key no label can have kept its task pending for ever).
TEST_F(BadInputTest, NodeSelectorAndTolerationsFollowTheLabelRules) {
  TaskSpec t = SharedTask(kGiB);
  t.node_selector = {{"zone!", "a"}};
  ExpectRejected(t, StatusCode::kInvalidArgument, "node_selector: \"zone!=a\"");
  t.node_selector = {{"zone", "a b"}};
  ExpectRejected(t, StatusCode::kInvalidArgument, "is not a label value");
  t.node_selector.clear();
  t.tolerations = {Toleration{"dedicated", "infer", /*exists=*/true}};
  ExpectRejected(t, StatusCode::kInvalidArgument,
                 "tolerations: operator Exists matches any value; drop value \"infer\"");
  t.tolerations = {Toleration{"bad key", "", /*exists=*/true}};
  ExpectRejected(t, StatusCode::kInvalidArgument, "tolerations: \"bad key=\"");
}

TEST_F(BadInputTest, ZeroOrNegativeDuration) {
  TaskSpec t = SharedTask(kGiB);
  t.duration_ms = 0;
  ExpectRejected(t, StatusCode::kInvalidArgument, "duration: must be at least 1ms, got 0ms");
  t.duration_ms = -60'000;
  ExpectRejected(t, StatusCode::kInvalidArgument, "duration: must be at least 1ms, got -60000ms");
}

TEST_F(BadInputTest, HeartbeatTimeoutUnderOneSecond) {
  TaskSpec t = SharedTask(1024);
  t.heartbeat_timeout_ms = 500;
  ExpectRejected(t, StatusCode::kInvalidArgument, "heartbeat_timeout: must be at least 1s, got 500ms");
}

TEST_F(BadInputTest, UnknownGpuModel) {
  TaskSpec t = SharedTask(kGiB);
  t.gpu_model = "TPUv9";
  ExpectRejected(t, StatusCode::kInvalidArgument,
                 "gpu_model: unknown GPU model \"TPUv9\" (the cluster has: H100");
}

TEST_F(BadInputTest, CN115981827A_Section6_MoreGpusThanAnyNodeHasIsRejected) {
  ExpectRejected(testing::WholeGpuTask(9), StatusCode::kResourceExhausted,
                 "gpus: 9 requested but the largest node has 8 GPUs");
}

TEST_F(BadInputTest, CN115981827A_Section6_MoreGpuMemoryThanAnyGpuHasIsRejected) {
  ExpectRejected(SharedTask(81 * kGiB), StatusCode::kResourceExhausted,
                 "gpu_mem: 81GiB per GPU requested but the largest GPU has 80GiB");
}

TEST_F(BadInputTest, AbsurdSizes) {
  ExpectRejected(SharedTask(int64_t{1} << 50), StatusCode::kInvalidArgument, "gpu_mem: ");
  ExpectRejected(testing::WholeGpuTask(100'000), StatusCode::kInvalidArgument,
                 "gpus: 100000 is larger than the limit 4096");
}

TEST_F(BadInputTest, CN115981827A_Section6_KeepPendingAcceptsWhatNoNodeFitsYet) {
  TaskSpec t = testing::WholeGpuTask(16);
  t.keep_pending_if_infeasible = true;
  const TaskId id = Submit(t);
  sched_->Schedule();
  EXPECT_EQ(T(id).state, TaskState::kPending);
  EXPECT_NE(T(id).reason.find("too few GPUs"), std::string::npos) << T(id).reason;
  // A big node joins: it runs.
  AddNode(MakeNode("big", 16, 80 * kGiB, "H100"));
  clock_.AdvanceMs(sched_->config().t2_ms);
  Heartbeat("n1");
  Heartbeat("big");
  sched_->Tick();
  EXPECT_EQ(T(id).state, TaskState::kAssigned);
}

TEST_F(BadInputTest, BadNodeRegistrationAndHeartbeat) {
  NodeSpec n = MakeNode("broken", 2, 16 * kGiB);
  n.gpus[1].total_mib = -1;
  Status s = sched_->RegisterNode(n);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("gpus[1].total_mib must be > 0, got -1"), std::string::npos);
  EXPECT_FALSE(sched_->cluster().Find("broken").has_value());
  EXPECT_EQ(sched_->HandleNodeHeartbeat({"ghost", {}, {}, {}}).code(), StatusCode::kNotFound);
  Status wrong = sched_->HandleNodeHeartbeat({"n1", {1, 2, 3}, {}, {}});
  EXPECT_NE(wrong.message().find("gpu_free_mib: 3 values for a node with 8 GPUs"),
            std::string::npos);
}

// Issue 40: a node registering again with less CPU or RAM than its tasks hold is refused, as
// one with a GPU below its reservations is, naming the resource and both amounts; the node
// keeps its capacity.
TEST_F(BadInputTest, Issue40_ReRegistrationBelowReservedCpuOrRamIsRefused) {
  TaskSpec big = SharedTask(kGiB, "big");
  big.resources = {48'000, 300 * kGiB};
  const TaskId id = Submit(big);
  sched_->Schedule();
  ASSERT_EQ(T(id).state, TaskState::kAssigned);
  NodeSpec fewer_cpus = MakeNode("n1", 8, 80 * kGiB, "H100");
  fewer_cpus.capacity.cpu_milli = 32'000;
  Status s = sched_->RegisterNode(fewer_cpus);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("node n1: cpu_milli 32000 shrank below its reservations of 48000"),
            std::string::npos)
      << s.message();
  NodeSpec less_ram = MakeNode("n1", 8, 80 * kGiB, "H100");
  less_ram.capacity.mem_mib = 256 * kGiB;
  s = sched_->RegisterNode(less_ram);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("node n1: mem_mib 262144 shrank below its reservations of 307200"),
            std::string::npos)
      << s.message();
  NodeSpec smaller_gpu = MakeNode("n1", 8, 80 * kGiB, "H100");
  for (GpuSpec& g : smaller_gpu.gpus) g.total_mib = 512;  // the GPU rule both follow
  EXPECT_EQ(sched_->RegisterNode(smaller_gpu).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(sched_->cluster().node(0).capacity.cpu_milli, 64'000);
  EXPECT_EQ(sched_->cluster().node(0).capacity.mem_mib, 512 * kGiB);
  ExpectInvariants();
  NodeSpec same = MakeNode("n1", 8, 80 * kGiB, "H100");
  same.capacity = {48'000, 300 * kGiB};  // exactly what is held: accepted
  EXPECT_TRUE(sched_->RegisterNode(same).ok());
}

TEST(SchedulerConfig, InvalidConfigNamesTheField) {
  FakeClock clock(0);
  SchedulerConfig config;
  config.t2_ms = 0;
  auto s = Scheduler::Create(config, clock);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "t2: must be > 0, got 0");
  config = {};
  config.fail_max = -1;
  EXPECT_NE(Scheduler::Create(config, clock).status().message().find("fail_max"),
            std::string::npos);
}

}  // namespace
}  // namespace gpusched::core
