// CN110955526B claim 2 across nodes, end to end through the C ABI with real processes (fork):
// the driver plans a stage's partitions over two executors (nodes) by available GPU memory
// and free CPUs, with a free-CPU limit; two child processes stand in for the two executors and
// each runs the partitions assigned to it through its own chunk runtime (simulated GPUs);
// the driver combines their outputs and checks them. Its own executable, so no other test's
// threads are alive when it forks.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpusched_c.h"

namespace {

constexpr int kPartitions = 6;
constexpr int kPerPartition = 1 << 16;  // floats
constexpr int64_t kMiB = 1024 * 1024;

// What the processes share: the stage's input and output, and who ran each partition.
struct Exchange {
  float in[kPartitions * kPerPartition];
  float out[kPartitions * kPerPartition];
  int ran_by[kPartitions];  // 1 + the executor's index
};

// The executor's part: each of its partitions through one chunk runtime ("scale_f32" x 2).
int RunExecutor(Exchange* x, const std::vector<std::string>& assigned, const std::string& me,
                int who) {
  gpusched_chunks_runtime* rt = nullptr;
  if (gpusched_chunks_create_sim(2, 64, 0, &rt) != 0) return 10;
  for (int p = 0; p < kPartitions; ++p) {
    if (assigned[p] != me) continue;
    gpusched_chunks_job* job = gpusched_chunks_job_new();
    const int64_t bytes = kPerPartition * sizeof(float);
    float* slice = x->in + p * kPerPartition;
    if (job == nullptr || gpusched_chunks_job_add_buffer(job, "in", slice, bytes, 0) != 0 ||
        gpusched_chunks_job_add_buffer(job, "out", x->out + p * kPerPartition, bytes, 0) != 0 ||
        gpusched_chunks_job_add_stage(job, "s", GPUSCHED_KERNEL_SCALE_F32, "in", "out", 2.0, 0) !=
            0 ||
        gpusched_chunks_run(rt, job) != 0) {
      return 11;
    }
    gpusched_chunks_job_free(job);
    x->ran_by[p] = who;
  }
  return gpusched_chunks_destroy(rt) == 0 ? 0 : 12;
}

// Plans 6 partitions of 16 MiB subtasks over node-a (GPUs with 40 and 20 MiB free, 8 free
// CPUs) and node-b (one GPU with 64 MiB free, 2 free CPUs), with min_free_cpu `limit`.
std::vector<std::string> Plan(int limit, std::vector<int>* gpus) {
  gpusched_chunks_plan* plan = nullptr;
  EXPECT_EQ(gpusched_chunks_plan_new(&plan), 0);
  const int64_t a[] = {40 * kMiB, 20 * kMiB};
  const int64_t b[] = {64 * kMiB};
  EXPECT_EQ(gpusched_chunks_plan_add_executor(plan, "exec-b", "node-b", b, 1, 2), 0);
  EXPECT_EQ(gpusched_chunks_plan_add_executor(plan, "exec-a", "node-a", a, 2, 8), 0);
  EXPECT_EQ(gpusched_chunks_plan_set_min_free_cpu(plan, limit), 0);
  EXPECT_EQ(gpusched_chunks_plan_assign(plan, kPartitions, 16 * kMiB, 1), 0);
  std::vector<std::string> executors;
  for (int p = 0; p < kPartitions; ++p) {
    const char* name = nullptr;
    int32_t gpu = -2;
    EXPECT_EQ(gpusched_chunks_plan_partition(plan, p, &name, &gpu), 0);
    executors.emplace_back(name != nullptr ? name : "?");
    gpus->push_back(gpu);
  }
  EXPECT_EQ(gpusched_chunks_plan_free(plan), 0);
  return executors;
}

TEST(CN110955526B, Claim2_AcrossNodes_TwoExecutorProcessesRunTheDriversPlan) {
  // Without a limit exec-b's 64 MiB GPU takes the first partitions while its 2 CPUs last; with
  // min_free_cpu 2 it serves one partition only (then 1 CPU free is under the limit).
  std::vector<int> gpus;
  EXPECT_EQ(Plan(0, &gpus), (std::vector<std::string>{"exec-b", "exec-b", "exec-a", "exec-a",
                                                      "exec-a", "exec-a"}));
  gpus.clear();
  const std::vector<std::string> assigned = Plan(2, &gpus);
  EXPECT_EQ(assigned, (std::vector<std::string>{"exec-b", "exec-a", "exec-a", "exec-a",
                                                "exec-a", "exec-a"}));
  EXPECT_EQ(gpus, (std::vector<int>{0, 0, 0, 1, -1, -1}));  // 40, 24, 20 MiB; then CPU executor
  void* shared = mmap(nullptr, sizeof(Exchange), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* x = static_cast<Exchange*>(shared);
  for (int i = 0; i < kPartitions * kPerPartition; ++i) x->in[i] = static_cast<float>(i % 1000);
  const char* names[] = {"exec-a", "exec-b"};
  pid_t children[2];
  for (int c = 0; c < 2; ++c) {
    children[c] = fork();
    ASSERT_GE(children[c], 0);
    if (children[c] == 0) _exit(RunExecutor(x, assigned, names[c], c + 1));
  }
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  for (int p = 0; p < kPartitions; ++p) EXPECT_EQ(x->ran_by[p], assigned[p] == "exec-a" ? 1 : 2);
  for (int i = 0; i < kPartitions * kPerPartition; ++i) {
    ASSERT_EQ(x->out[i], 2.0f * x->in[i]) << "element " << i;
  }
  munmap(shared, sizeof(Exchange));
}

TEST(CN110955526B, Claim2_AcrossNodes_CAbiRefusesBadJsonNamingTheField) {
  gpusched_chunks_plan* plan = nullptr;
  ASSERT_EQ(gpusched_chunks_plan_new(&plan), 0);
  EXPECT_EQ(gpusched_chunks_plan_add_nodes_json(plan, R"({"nodes": [{"name": "n", "gpus": 1}]})"),
            GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT_STREQ(gpusched_chunks_last_error(),
               "invalid_argument: nodes[0].gpus: must be an array");
  EXPECT_EQ(gpusched_chunks_plan_add_nodes_json(
                plan, R"({"nodes": [{"name": "n", "gpus": [{"index": 0, "free_mib": 32}]}]})"),
            0);
  EXPECT_EQ(gpusched_chunks_plan_assign(plan, 1, 16 * kMiB, 1), 0);
  const char* name = nullptr;
  int32_t gpu = -2;
  EXPECT_EQ(gpusched_chunks_plan_partition(plan, 0, &name, &gpu), 0);
  EXPECT_STREQ(name, "n");
  EXPECT_EQ(gpu, 0);
  EXPECT_EQ(gpusched_chunks_plan_free(plan), 0);
  EXPECT_EQ(gpusched_chunks_plan_free(plan), GPUSCHED_E_INVALID_ARGUMENT);  // freed already
}

}  // namespace
