#include "spec/spec_yaml.h"

#include <gtest/gtest.h>

namespace gpusched::spec {
namespace {

TEST(TaskSpecYaml, ParsesEveryField) {
  auto spec = ParseTaskSpecYaml(R"(
name: train-resnet
gpus: 2
gpu_mem: 20GiB
gpu_model: A100
cpu: 8
mem: 64GiB
duration: 6h
time: 8h
heartbeat_timeout: 90s
workdir: /home/u/proj
retries: 1
profile: {task_type: classify, model: resnet50, batch: 32, height: 224, width: 224}
node_selector: {zone: a}
tolerations:
  - {key: dedicated, operator: Equal, value: infer, effect: NoSchedule}
keep_pending: true
command: ["python3", "train.py", "--epochs", "3"]
env: {WANDB_MODE: offline}
)",
                                "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "train-resnet");
  EXPECT_EQ(spec->gpus, 2);
  EXPECT_EQ(spec->gpu_mem_mib, 20 * 1024);
  EXPECT_EQ(spec->gpu_model, "A100");
  EXPECT_EQ(spec->resources.cpu_milli, 8000);
  EXPECT_EQ(spec->resources.mem_mib, 64 * 1024);
  EXPECT_EQ(spec->duration_ms, 6 * 3'600'000);
  EXPECT_EQ(spec->time_limit_ms, 8 * 3'600'000);
  EXPECT_EQ(spec->heartbeat_timeout_ms, 90'000);
  EXPECT_EQ(spec->workdir, "/home/u/proj");
  EXPECT_EQ(spec->max_retries, 1);
  ASSERT_TRUE(spec->profile.has_value());
  EXPECT_EQ(spec->profile->batch, 32);
  EXPECT_EQ(spec->node_selector.at("zone"), "a");
  ASSERT_EQ(spec->tolerations.size(), 1u);
  EXPECT_EQ(spec->tolerations[0].value, "infer");
  EXPECT_TRUE(spec->tolerations[0].has_effect);
  EXPECT_TRUE(spec->keep_pending_if_infeasible);
  EXPECT_EQ(spec->command.size(), 4u);
  EXPECT_EQ(spec->env.at("WANDB_MODE"), "offline");
}

TEST(TaskSpecYaml, Issue13_GangAndPriorityFields) {
  auto spec = ParseTaskSpecYaml(R"(
nodes: 4
gpus_per_node: 8
tasks_per_node: 8
priority: high
preemptible: false
grace: 45s
gang_timeout: 2h
command: torchrun train.py
)",
                                "gang.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->nodes, 4);
  EXPECT_EQ(spec->gpus, 8);  // per node
  EXPECT_EQ(spec->tasks_per_node, 8);
  EXPECT_EQ(spec->priority_class, "high");
  EXPECT_FALSE(spec->preemptible);
  EXPECT_EQ(spec->grace_ms, 45'000);
  EXPECT_EQ(spec->gang_timeout_ms, 7'200'000);
  // With nodes, `gpus` is the total (Slurm's --gpus) and must split evenly.
  auto total = ParseTaskSpecYaml("nodes: 2\ngpus: 16\ncommand: x\n", "t.yaml");
  ASSERT_TRUE(total.ok()) << total.status().ToString();
  EXPECT_EQ(total->gpus, 8);
  auto uneven = ParseTaskSpecYaml("nodes: 3\ngpus: 16\ncommand: x\n", "t.yaml");
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("gpus: 16 GPUs do not split evenly over 3 nodes"),
            std::string::npos) << uneven.status().ToString();
  auto both = ParseTaskSpecYaml("nodes: 2\ngpus: 16\ngpus_per_node: 8\ncommand: x\n", "t.yaml");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("give gpus or gpus_per_node, not both"),
            std::string::npos) << both.status().ToString();
  auto bad = ParseTaskSpecYaml("preemptible: maybe\ncommand: x\n", "t.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("preemptible"), std::string::npos);
}

TEST(TaskSpecYaml, ShellStringCommandAndMillicores) {
  auto spec = ParseTaskSpecYaml("cpu: 500m\ncommand: echo hi && exit 3\n", "s.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->resources.cpu_milli, 500);
  EXPECT_EQ(spec->command, (std::vector<std::string>{"/bin/sh", "-c", "echo hi && exit 3"}));
}

void ExpectError(const std::string& yaml, const std::string& fragment) {
  auto spec = ParseTaskSpecYaml(yaml, "job.yaml");
  ASSERT_FALSE(spec.ok()) << "accepted: " << yaml;
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find(fragment), std::string::npos)
      << spec.status().message() << "\nexpected: " << fragment;
}

TEST(TaskSpecYaml, UnknownFieldIsAnErrorNamingItAndItsLine) {
  ExpectError("gpus: 1\ngpu_memory: 4GiB\n", "job.yaml:2: unknown field \"gpu_memory\" (known fields: name, gpus, gpu_mem");
  ExpectError("profile: {model: x, batchsize: 3}\n", "unknown field \"profile.batchsize\"");
  ExpectError("tolerations: [{key: a, operater: Exists}]\n", "unknown field \"tolerations.operater\"");
}

TEST(TaskSpecYaml, BadValuesNameTheFieldAndValue) {
  ExpectError("gpu_mem: -5GiB\n", "job.yaml:1: gpu_mem: must be >= 0, got \"-5GiB\"");
  ExpectError("gpus: two\n", "job.yaml:1: gpus: \"two\" is not an integer");
  ExpectError("duration: 5 weeks\n", "duration: unknown duration unit");
  ExpectError("cpu: lots\n", "cpu: \"lots\" is not a CPU amount");
  ExpectError("keep_pending: maybe\n", "keep_pending: \"maybe\" is not true or false");
  ExpectError("gpus: [1, 2]\n", "gpus: must be a single value");
  ExpectError("tolerations: [{key: a, operator: Sometimes}]\n", "tolerations.operator: \"Sometimes\"");
  ExpectError("- just\n- a list\n", "a task spec must be a mapping");
  ExpectError("gpus: [1, 2\n", "not valid YAML");
  ExpectError("gpu_mem: 0\n", "job.yaml:1: gpu_mem: \"0\" is no memory");
  // YAML forbids a key twice; yaml-cpp read the first and dropped the second unsaid.
  ExpectError("gpus: 1\nname: x\ngpus: 2\n",
              "job.yaml:3: field \"gpus\" given twice (first on line 1)");
  ExpectError("env: {A: 1, A: 2}\n", "field \"env.A\" given twice");
  ExpectError("profile: {model: x, model: y}\n", "field \"profile.model\" given twice");
  ExpectError("command: \"\"\n", "job.yaml:1: command: empty");
  ExpectError("cpu: -1\n", "job.yaml:1: cpu: must be >= 0, got \"-1\"");
}

TEST(MemoryTableYaml, LoadsRowsAndFormulas) {
  core::GpuMemoryTable table;
  Status s = LoadMemoryTableYaml(R"(
rows:
  - {task_type: classify, model: resnet50, batch: 32, height: 224, width: 224, mib: 5000}
formulas:
  - {model: bert-base, base: 1GiB, per_image: 50, ref_height: 1, ref_width: 512}
)",
                                 "memory.yaml", &table);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(table.Estimate({"classify", "resnet50", 32, 224, 224})->mib, 5000);
  EXPECT_EQ(table.Estimate({"embed", "bert-base", 4, 1, 512})->mib, 1024 + 200);
}

TEST(MemoryTableYaml, ErrorLeavesTheTableUnchanged) {
  core::GpuMemoryTable table;
  Status s = LoadMemoryTableYaml(R"(
rows:
  - {model: resnet50, batch: 32, mib: 5000}
  - {model: resnet50, batch: 0, mib: 100}
)",
                                 "memory.yaml", &table);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("memory.yaml:4: memory_table.rows.batch: must be >= 1, got 0"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(table.rows().empty());
}

}  // namespace
}  // namespace gpusched::spec
