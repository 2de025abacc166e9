#include "server/rest_params.h"

#include <gtest/gtest.h>

#include <csignal>

namespace gpusched::server::rest {
namespace {

TEST(RestParamsTest, QueryRejectsUnknownAndRepeatedNames) {
  auto q = CheckQuery({{"limit", "5"}, {"state", "running"}}, {"limit", "state"});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->at("limit"), "5");
  auto unknown = CheckQuery({{"colour", "red"}}, {"limit"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "\"colour\": unknown query parameter (known: limit)");
  auto twice = CheckQuery({{"limit", "1"}, {"limit", "2"}}, {"limit"});
  EXPECT_EQ(twice.status().message(), "limit: given more than once");
}

TEST(RestParamsTest, IntegersAreWholeAndInRange) {
  EXPECT_EQ(*IntParam({}, "limit", 1, 10, 7), 7);
  EXPECT_EQ(*IntParam({{"limit", "10"}}, "limit", 1, 10, 7), 10);
  for (const char* bad : {"0", "11", "1.5", "", "5x", " 5", "99999999999999999999"}) {
    auto v = IntParam({{"limit", bad}}, "limit", 1, 10, 7);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().message(),
              "limit: \"" + std::string(bad) + "\" is not a whole number in 1..10");
  }
}

TEST(RestParamsTest, StatesDurationsTimesAndIds) {
  EXPECT_EQ(**StateParam({{"state", "failed"}}, "state"), core::TaskState::kFailed);
  EXPECT_FALSE(StateParam({}, "state")->has_value());
  EXPECT_EQ(StateParam({{"state", "done"}}, "state").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(*DurationParam({{"step", "5m"}}, "step", 1), 300'000);
  EXPECT_FALSE(DurationParam({{"step", "0s"}}, "step", 1).ok());
  const int64_t now = 1'800'000'000'000;
  EXPECT_EQ(*TimeParam({{"since", "2h"}}, "since", now, 0), now - 7'200'000);
  EXPECT_EQ(*TimeParam({{"since", "1700000000000"}}, "since", now, 0), 1'700'000'000'000);
  EXPECT_EQ(*TimeParam({{"since", "30"}}, "since", now, 0), now - 30'000);  // seconds ago
  auto bad = TimeParam({{"since", "yesterday"}}, "since", now, 0);
  EXPECT_EQ(bad.status().message(),
            "since: \"yesterday\" is neither a duration ago (\"2h\") nor a Unix time in ms");
  EXPECT_EQ(*TaskIdParam("42"), 42u);
  EXPECT_EQ(TaskIdParam("0").status().message(), "id: \"0\" is not a task id (>= 1)");
  EXPECT_FALSE(TaskIdParam("-3").ok());
}

TEST(RestParamsTest, SubmitBodyFields) {
  auto b = ParseSubmitBody(R"({"command": ["python3", "t.py"], "name": "n", "gpus": 2,
      "gpu_mem": "6GiB", "cpu": 1.5, "mem": 2048, "duration": "1h", "retries": 3,
      "env": {"K": "V"}, "idempotency_key": "key"})");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->spec.command, (std::vector<std::string>{"python3", "t.py"}));
  EXPECT_EQ(b->spec.gpus, 2);
  EXPECT_EQ(b->spec.gpu_mem_mib, 6144);
  EXPECT_EQ(b->spec.resources.cpu_milli, 1500);
  EXPECT_EQ(b->spec.resources.mem_mib, 2048);
  EXPECT_EQ(b->spec.duration_ms, 3'600'000);
  EXPECT_EQ(b->spec.max_retries, 3);
  EXPECT_EQ(b->spec.env.at("K"), "V");
  EXPECT_EQ(b->idempotency_key, "key");
  EXPECT_EQ(*ParseSubmitBody(R"({"command": ["x"], "duration": 90})")->spec.duration_ms, 90'000);
  EXPECT_FALSE(b->array.has_value());
  auto array = ParseSubmitBody(R"({"command": ["x"], "array": "0-999"})");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  ASSERT_TRUE(array->array.has_value());
  EXPECT_EQ(array->array->first, 0);
  EXPECT_EQ(array->array->last, 999);
}

// The REST form of `submit --selector/--toleration/--profile` (CN115981827A claim 1,
// CN109992422A claim 1): the same parsers, the same errors.
TEST(RestParamsTest, SubmitBodyNodeRulesAndProfile) {
  auto b = ParseSubmitBody(R"({"command": ["x"], "node_selector": {"zone": "a"},
      "tolerations": ["dedicated=infer:NoSchedule", "spot"], "profile": "resnet50,batch=32"})");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->spec.node_selector, (std::map<std::string, std::string>{{"zone", "a"}}));
  ASSERT_EQ(b->spec.tolerations.size(), 2u);
  EXPECT_EQ(b->spec.tolerations[0],
            (core::Toleration{"dedicated", "infer", false, true, core::TaintEffect::kNoSchedule}));
  EXPECT_TRUE(b->spec.tolerations[1].exists);
  ASSERT_TRUE(b->spec.profile.has_value());
  EXPECT_EQ(*b->spec.profile, (core::MemoryProfile{"", "resnet50", 32, 0, 0}));
  const std::pair<const char*, const char*> bad[] = {
      {R"({"command": ["x"], "node_selector": {"": "a"}})", "node_selector: \"=a\": the key is empty"},
      {R"({"command": ["x"], "node_selector": {"zone": [1]}})",
       "node_selector: must be a single value, got [1]"},
      {R"({"command": ["x"], "tolerations": ["a=b:Sometimes"]})",
       "tolerations[0]: \"a=b:Sometimes\": unknown effect \"Sometimes\""},
      {R"({"command": ["x"], "profile": "resnet50,batch=0"})", "profile: \"resnet50,batch=0\": batch"},
  };
  for (const auto& [body, prefix] : bad) {
    auto r = ParseSubmitBody(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().message().rfind(prefix, 0), 0u) << body << " -> " << r.status().message();
  }
}

// The same key in two objects is two keys, not one given twice.
TEST(RestParamsTest, AKeyMayRepeatInAnotherObject) {
  auto b = ParseSubmitBody(
      R"({"command": ["x"], "env": {"zone": "a"}, "node_selector": {"zone": "a"}})");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->spec.node_selector.at("zone"), "a");
}

// CPU as the CLI and job files take it: cores, or a string of cores or millicores.
TEST(RestParamsTest, CpuIsCoresOrAStringOfCoresOrMillicores) {
  for (const auto& [body, milli] : std::vector<std::pair<std::string, int64_t>>{
           {R"({"command": ["x"], "cpu": 2})", 2000},
           {R"({"command": ["x"], "cpu": 0.25})", 250},
           {R"({"command": ["x"], "cpu": "500m"})", 500},
           {R"({"command": ["x"], "cpu": "1.5"})", 1500}}) {
    auto b = ParseSubmitBody(body);
    ASSERT_TRUE(b.ok()) << body << ": " << b.status().ToString();
    EXPECT_EQ(b->spec.resources.cpu_milli, milli) << body;
  }
}

TEST(RestParamsTest, SubmitBodyErrorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "body: not valid JSON"},
      {"[]", "body: must be a JSON object, got array []"},
      {R"({"command": {"a": "x"}})", "command: must be a string or a list of strings"},
      {R"({"command": [["x"]]})", "command: must be a single value, got [x]"},
      {R"({"command": ["x"], "gpus": 1.5})", "gpus: \"1.5\" is not an integer"},
      {R"({"command": ["x"], "gpu_mem": "lots"})", "gpu_mem: "},
      {R"({"command": ["x"], "duration": -1})", "duration: must be >= 0"},
      {R"({"command": ["x"], "cpu": "2x"})", "cpu: \"2x\" is not a CPU amount (use 4 or 500m)"},
      {R"({"command": ["x"], "cpu": true})", "cpu: \"true\" is not a CPU amount"},
      {R"({"command": ["x"], "gpu_mem": "0GiB"})", "gpu_mem: \"0GiB\" is no memory"},
      {R"({"command": ["x"], "gpu_mem": 0})", "gpu_mem: \"0\" is no memory"},
      {R"({"command": ["x"], "gpus": 1, "gpus": 2})", "\"gpus\": given twice"},
      {R"({"command": ["x"], "env": {"A": "1", "A": "2"}})", "\"A\": given twice"},
      {R"({"command": ["x"], "env": {"A": [1]}})", "env: must be a single value, got [1]"},
      {R"({"command": ["x"], "gpu": 1})", "\"gpu\": unknown field"},
      {R"({"command": []})", "command: missing"},
      {R"({"command": ["x"], "array": 5})", "array: must be a string such as \"0-999\""},
      {R"({"command": ["x"], "array": "9-3"})", "array: \"9-3\" ends before it starts"},
      {R"({"command": ["x"], "array": "0-10000"})", "array: \"0-10000\" has 10001 indices"},
  };
  for (const auto& [body, prefix] : cases) {
    auto b = ParseSubmitBody(body);
    ASSERT_FALSE(b.ok()) << body;
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(b.status().message().rfind(prefix, 0), 0u) << body << " -> " << b.status().message();
  }
}

// Issue 41: the REST body takes a job file's fields with the file's keys and values: the
// CLI's time limit, working directory, gang, priority, node rules and profile as objects, a
// command as a shell string.
TEST(RestParamsTest, Issue41_SubmitBodyTakesTheJobFilesFieldsAndValues) {
  auto b = ParseSubmitBody(R"({"command": "python3 train.py > out.log", "time": "2h",
      "workdir": "/data/run", "nodes": 2, "gpus_per_node": 4, "tasks_per_node": 2,
      "priority": "high", "preemptible": false, "grace": "90s", "signal": "USR1",
      "gang_timeout": "10m", "heartbeat_timeout": "5m", "keep_pending": true,
      "tolerations": [{"key": "spot", "operator": "Exists"}], "node_selector": {"zone": "a"},
      "profile": {"model": "resnet50", "batch": 8}, "name": null,
      "gpu_model": "[a, {b: c}]"})");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const core::TaskSpec& s = b->spec;
  EXPECT_EQ(s.command, (std::vector<std::string>{"/bin/sh", "-c", "python3 train.py > out.log"}));
  EXPECT_EQ(s.time_limit_ms, 7'200'000);
  EXPECT_EQ(s.workdir, "/data/run");
  EXPECT_EQ(s.nodes, 2);
  EXPECT_EQ(s.gpus, 4);
  EXPECT_EQ(s.tasks_per_node, 2);
  EXPECT_EQ(s.priority_class, "high");
  EXPECT_FALSE(s.preemptible);
  EXPECT_EQ(s.grace_ms, 90'000);
  EXPECT_EQ(s.stop_signal, SIGUSR1);
  EXPECT_EQ(s.gang_timeout_ms, 600'000);
  EXPECT_EQ(s.heartbeat_timeout_ms, 300'000);
  EXPECT_TRUE(s.keep_pending_if_infeasible);
  ASSERT_EQ(s.tolerations.size(), 1u);
  EXPECT_EQ(s.tolerations[0], (core::Toleration{"spot", "", true, false, {}}));
  EXPECT_EQ(*s.profile, (core::MemoryProfile{"", "resnet50", 8, 0, 0}));
  EXPECT_EQ(s.name, "");  // null: not given
  EXPECT_EQ(s.gpu_model, "[a, {b: c}]");  // a JSON string is text, never read as YAML
}

// What a REST call cannot mean is refused naming the field: `export` (the variables of a
// shell the call does not have), a relative workdir (nothing to resolve it from), the job
// file's own errors (gpus split over nodes), and an unknown field lists the known ones.
TEST(RestParamsTest, Issue41_SubmitBodyRefusalsNameTheFieldAndValue) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"command": ["x"], "export": "ALL"})", "export: names variables of the submitting"},
      {R"({"command": ["x"], "workdir": "runs/1"})", "workdir: \"runs/1\" is not an absolute path"},
      {R"({"command": ["x"], "nodes": 2, "gpus": 3})", "gpus: 3 GPUs do not split evenly over 2"},
      {R"({"command": ["x"], "gpus": 2, "gpus_per_node": 2})", "gpus_per_node: give gpus or"},
      {R"({"command": ["x"], "signal": "STOP"})", "signal: "},
      {R"({"command": ["x"], "time": "soon"})", "time: \"soon\""},
      {R"({"command": ["x"], "preemptible": "maybe"})",
       "preemptible: \"maybe\" is not true or false"},
      {R"({"command": ["x"], "name": {"a": 1}})", "name: must be a single value, got {a: 1}"},
      {R"({"command": ["x"], "timeout": "1h"})", "\"timeout\": unknown field (known: name, gpus,"},
      {R"({"command": [[[[[["x"]]]]]]})", "command: nested too deeply"},
  };
  for (const auto& [body, prefix] : cases) {
    auto b = ParseSubmitBody(body);
    ASSERT_FALSE(b.ok()) << body;
    EXPECT_EQ(b.status().message().rfind(prefix, 0), 0u) << body << " -> " << b.status().message();
  }
  auto unknown = ParseSubmitBody(R"({"command": ["x"], "timeout": "1h"})");
  EXPECT_NE(unknown.status().message().find("gang_timeout, idempotency_key, array)"),
            std::string::npos) << unknown.status().message();
  EXPECT_EQ(unknown.status().message().find("export"), std::string::npos);
}

}  // namespace
}  // namespace gpusched::server::rest
