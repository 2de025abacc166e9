// Issue 41: docs/job-spec.md's table is the one schema of a job, whichever door it comes
// through: the YAML job file (spec::ParseJobFileYaml), the REST body (rest::ParseSubmitBody)
// and gRPC's TaskSpec (rpc::TaskSpecFromProto). For every field the table lists, one sample
// value given through each door must give the same core::TaskSpec. A field added to the table
// without a sample here fails, so a field cannot reach one door only.

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "gpusched/v1/gpusched.pb.h"
#include "rpc/convert.h"
#include "rpc/json.h"
#include "server/rest_params.h"
#include "spec/spec_yaml.h"

namespace gpusched::server::rest {
namespace {

// One field's sample value, as each door writes it.
struct Sample {
  std::string yaml;                          // the field's line in a job file
  std::string json;                          // the field's member in a REST body
  std::function<void(v1::TaskSpec*)> proto;  // the field set on a gRPC TaskSpec
};

// Fields only the CLI reads: they describe the submitter's shell, which neither a REST call
// nor a gRPC request has (the CLI turns them into `env` before it sends the task).
const std::set<std::string> kCliOnly = {"export"};

const std::map<std::string, Sample>& Samples() {
  using P = v1::TaskSpec*;
  static const std::map<std::string, Sample> samples = {
      {"name", {"name: train", R"("name": "train")", [](P p) { p->set_name("train"); }}},
      {"command",
       {"command: [python3, t.py]", R"("command": ["python3", "t.py"])",
        [](P p) {
          p->clear_command();
          p->add_command("python3");
          p->add_command("t.py");
        }}},
      {"gpus", {"gpus: 2", R"("gpus": 2)", [](P p) { p->set_gpus(2); }}},
      {"gpu_mem", {"gpu_mem: 4GiB", R"("gpu_mem": "4GiB")", [](P p) { p->set_gpu_mem_mib(4096); }}},
      {"gpu_model",
       {"gpu_model: H100", R"("gpu_model": "H100")", [](P p) { p->set_gpu_model("H100"); }}},
      {"cpu", {"cpu: 500m", R"("cpu": "500m")", [](P p) { p->set_cpu_milli(500); }}},
      {"mem", {"mem: 2GiB", R"("mem": "2GiB")", [](P p) { p->set_mem_mib(2048); }}},
      {"duration",
       {"duration: 90s", R"("duration": "90s")", [](P p) { p->set_duration_ms(90'000); }}},
      {"time", {"time: 2h", R"("time": "2h")", [](P p) { p->set_time_limit_ms(7'200'000); }}},
      {"heartbeat_timeout",
       {"heartbeat_timeout: 30s", R"("heartbeat_timeout": "30s")",
        [](P p) { p->set_heartbeat_timeout_ms(30'000); }}},
      {"retries", {"retries: 3", R"("retries": 3)", [](P p) { p->set_max_retries(3); }}},
      {"workdir",
       {"workdir: /data/run", R"("workdir": "/data/run")",
        [](P p) { p->set_workdir("/data/run"); }}},
      {"env", {"env: {A: b}", R"("env": {"A": "b"})", [](P p) { (*p->mutable_env())["A"] = "b"; }}},
      {"keep_pending",
       {"keep_pending: true", R"("keep_pending": true)", [](P p) { p->set_keep_pending(true); }}},
      {"node_selector",
       {"node_selector: {zone: a}", R"("node_selector": {"zone": "a"})",
        [](P p) { (*p->mutable_node_selector())["zone"] = "a"; }}},
      {"tolerations",
       {"tolerations: [{key: dedicated, value: infer, effect: NoSchedule}]",
        R"("tolerations": [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}])",
        [](P p) {
          v1::Toleration* t = p->add_tolerations();
          t->set_key("dedicated");
          t->set_value("infer");
          t->set_effect("NoSchedule");
        }}},
      {"profile",
       {"profile: {model: resnet50, batch: 32}", R"("profile": {"model": "resnet50", "batch": 32})",
        [](P p) {
          p->mutable_profile()->set_model("resnet50");
          p->mutable_profile()->set_batch(32);
        }}},
      {"nodes", {"nodes: 2", R"("nodes": 2)", [](P p) { p->set_nodes(2); }}},
      {"gpus_per_node", {"gpus_per_node: 4", R"("gpus_per_node": 4)", [](P p) { p->set_gpus(4); }}},
      {"tasks_per_node",
       {"tasks_per_node: 2", R"("tasks_per_node": 2)", [](P p) { p->set_tasks_per_node(2); }}},
      {"priority",
       {"priority: high", R"("priority": "high")", [](P p) { p->set_priority_class("high"); }}},
      {"preemptible",
       {"preemptible: false", R"("preemptible": false)", [](P p) { p->set_preemptible(false); }}},
      {"grace", {"grace: 45s", R"("grace": "45s")", [](P p) { p->set_grace_ms(45'000); }}},
      {"signal", {"signal: USR1", R"("signal": "USR1")", [](P p) { p->set_stop_signal(SIGUSR1); }}},
      {"gang_timeout",
       {"gang_timeout: 10m", R"("gang_timeout": "10m")",
        [](P p) { p->set_gang_timeout_ms(600'000); }}},
  };
  return samples;
}

// The fields docs/job-spec.md's table lists, in its order: the "| `name` | ..." rows of the
// table whose header starts "| field |" (the file has other tables: exit codes, failures).
std::vector<std::string> DocumentedFields() {
  std::ifstream in(std::string(GPUSCHED_SOURCE_DIR) + "/docs/job-spec.md");
  EXPECT_TRUE(in.good()) << "docs/job-spec.md not found under " << GPUSCHED_SOURCE_DIR;
  static const std::regex row(R"(^\| `([a-z_]+)` \|)");
  std::vector<std::string> fields;
  std::smatch m;
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| field |", 0) == 0) in_table = true;
    if (line.empty()) in_table = false;
    if (in_table && std::regex_search(line, m, row)) fields.push_back(m[1]);
  }
  return fields;
}

// A spec as comparable bytes: its protobuf form, serialized deterministically (map entries
// in key order), so that two specs are equal when their bytes are.
std::string Canonical(const core::TaskSpec& s) {
  v1::TaskSpec p;
  rpc::TaskSpecToProto(s, &p);
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    p.SerializeToCodedStream(&coded);
  }
  return bytes;
}

// A spec as readable text for a failure message.
std::string Show(const core::TaskSpec& s) {
  v1::Task t;
  rpc::TaskSpecToProto(s, t.mutable_spec());
  return rpc::TaskJson(t, 0).dump();
}

// Every door, with `command: [x]` besides the field (REST and gRPC need one).
struct ThreeDoors {
  StatusOr<core::TaskSpec> yaml, rest, grpc;
};
ThreeDoors Submit(const std::string& field, const Sample& s) {
  const bool command = field == "command";
  ThreeDoors out{Internal(""), Internal(""), Internal("")};
  out.yaml = spec::ParseTaskSpecYaml((command ? "" : "command: [x]\n") + s.yaml + "\n", "job.yaml");
  StatusOr<SubmitBody> body =
      ParseSubmitBody("{" + std::string(command ? "" : R"("command": ["x"], )") + s.json + "}");
  out.rest = body.ok() ? StatusOr<core::TaskSpec>(body->spec) : body.status();
  v1::TaskSpec p;
  p.add_command("x");
  s.proto(&p);
  out.grpc = rpc::TaskSpecFromProto(p);
  return out;
}

TEST(JobSpecSchema, Issue41_JobSpecIsOneSchemaForYamlRestAndGrpc) {
  const std::vector<std::string> documented = DocumentedFields();
  ASSERT_GE(documented.size(), 20u) << "the table of docs/job-spec.md was not found";
  // The parser reads exactly the fields the table documents.
  EXPECT_EQ(std::set<std::string>(documented.begin(), documented.end()),
            std::set<std::string>(spec::JobFileFields().begin(), spec::JobFileFields().end()));
  const std::string plain = Canonical(*spec::ParseTaskSpecYaml("command: [x]\n", "job.yaml"));
  for (const std::string& field : documented) {
    SCOPED_TRACE(field);
    if (kCliOnly.count(field)) continue;
    auto it = Samples().find(field);
    ASSERT_NE(it, Samples().end())
        << "docs/job-spec.md lists \"" << field << "\" but this test has no sample of it: add "
        << "one (YAML, REST and gRPC) so that every door takes it";
    const ThreeDoors got = Submit(field, it->second);
    ASSERT_TRUE(got.yaml.ok()) << got.yaml.status().ToString();
    ASSERT_TRUE(got.rest.ok()) << got.rest.status().ToString();
    ASSERT_TRUE(got.grpc.ok()) << got.grpc.status().ToString();
    EXPECT_NE(Canonical(*got.yaml), plain) << "the sample changed nothing";
    EXPECT_EQ(Canonical(*got.yaml), Canonical(*got.rest))
        << "YAML: " << Show(*got.yaml) << "\nREST: " << Show(*got.rest);
    EXPECT_EQ(Canonical(*got.yaml), Canonical(*got.grpc))
        << "YAML: " << Show(*got.yaml) << "\ngRPC: " << Show(*got.grpc);
  }
}

// `export` is the submitting shell's: a job file takes it, REST refuses it naming it (its
// variables go in `env`); gRPC's TaskSpec has no such field (the CLI sends them as `env`).
TEST(JobSpecSchema, Issue41_ExportIsTheClisOnly) {
  StatusOr<spec::JobFile> file = spec::ParseJobFileYaml("command: [x]\nexport: [A=1]\n", "j.yaml");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_TRUE(file->export_env.has_value());
  StatusOr<SubmitBody> rest = ParseSubmitBody(R"({"command": ["x"], "export": ["A=1"]})");
  ASSERT_FALSE(rest.ok());
  EXPECT_EQ(rest.status().message().rfind("export: ", 0), 0u) << rest.status().message();
}

// The OpenAPI description of the REST body (web/openapi.json, "Submit") names the same
// fields: the table's, less the CLI's own, and REST's idempotency_key and array.
TEST(JobSpecSchema, Issue41_OpenApiSubmitNamesEveryField) {
  std::ifstream in(std::string(GPUSCHED_SOURCE_DIR) + "/web/openapi.json");
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << "web/openapi.json not found or not JSON";
  std::set<std::string> described;
  for (const auto& [name, schema] : doc["components"]["schemas"]["Submit"]["properties"].items()) {
    described.insert(name);
  }
  std::set<std::string> want = {"idempotency_key", "array"};
  for (const std::string& f : DocumentedFields()) {
    if (!kCliOnly.count(f)) want.insert(f);
  }
  EXPECT_EQ(described, want);
}

}  // namespace
}  // namespace gpusched::server::rest
