// `gpusched agent --config FILE` (agent/agent_config.h).

#include "agent/agent_config.h"

#include <gtest/gtest.h>

namespace gpusched::agent {
namespace {

TEST(AgentConfigTest, EveryKeyIncludingLabelsAndTaints) {
  AgentConfig c;
  Status s = ApplyAgentConfigYaml(
      "server: 10.0.0.1:7070\nname: gpu1\ngpus: 2x16GiB\nlisten: 0.0.0.0:7071\n"
      "data_dir: /var/lib/a\ntls_dir: /etc/tls\ntopology: pcie\n"
      "labels: {zone: a, gpusched.io/gpu: a100}\n"
      "taints: [dedicated=infer:NoSchedule, {key: spot, effect: PreferNoSchedule}]\n",
      "agent.yaml", c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.server, "10.0.0.1:7070");
  EXPECT_EQ(c.name, "gpu1");
  EXPECT_EQ(c.gpus, "2x16GiB");
  EXPECT_EQ(c.listen, "0.0.0.0:7071");
  EXPECT_EQ(c.data_dir, "/var/lib/a");
  EXPECT_EQ(c.tls_dir, "/etc/tls");
  EXPECT_EQ(c.topology, "pcie");
  EXPECT_EQ(c.labels, (std::map<std::string, std::string>{{"gpusched.io/gpu", "a100"},
                                                          {"zone", "a"}}));
  EXPECT_EQ(c.taints,
            (std::vector<core::Taint>{{"dedicated", "infer", core::TaintEffect::kNoSchedule},
                                      {"spot", "", core::TaintEffect::kPreferNoSchedule}}));
}

TEST(AgentConfigTest, BadInputNamesTheFileTheKeyAndTheValue) {
  const std::pair<const char*, const char*> cases[] = {
      {"gpu: 8x80GiB\n", "agent.yaml: unknown key \"gpu\""},
      {"name: a\nname: b\n", "agent.yaml: name: given twice"},
      {"name: [a]\n", "agent.yaml: name: expected a single value"},
      {"labels: {\"\": x}\n", "agent.yaml: labels: \"=x\": the key is empty"},
      {"labels: [a]\n", "agent.yaml: labels: expected a mapping"},
      {"taints: [a=b:Sometimes]\n",
       "agent.yaml: taints[0]: \"a=b:Sometimes\": unknown effect \"Sometimes\""},
      {"taints: [{key: a, colour: red}]\n", "agent.yaml: taints[0]: \"colour\" is not key"},
      {"taints: a=b:NoSchedule\n", "agent.yaml: taints: expected a list of taints"},
      {"[a\n", "agent.yaml:"},
      {"- a\n", "agent.yaml: expected a mapping of options"},
  };
  for (const auto& [text, prefix] : cases) {
    AgentConfig c;
    Status s = ApplyAgentConfigYaml(text, "agent.yaml", c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(s.message().rfind(prefix, 0), 0u) << text << " -> " << s.message();
  }
}

TEST(AgentConfigTest, Issue39_OutputKeysAndTheirBadValues) {
  AgentConfig c;
  EXPECT_EQ(c.log_max_size_bytes, int64_t{1} << 30);  // the default: 1 GiB
  Status s = ApplyAgentConfigYaml(
      "log_max_size: 1MiB\ntask_files_retention: 2h\nlog_level: debug\nlog_format: json\n",
      "agent.yaml", c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.log_max_size_bytes, 1 << 20);
  EXPECT_EQ(c.task_files_retention_ms, 2 * 3'600'000);
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.log_format, "json");
  for (const char* bad : {"log_max_size: lots\n", "log_max_size: 0\n",
                          "task_files_retention: soon\n", "log_max_size: [1]\n"}) {
    AgentConfig d;
    const Status e = ApplyAgentConfigYaml(bad, "agent.yaml", d);
    EXPECT_FALSE(e.ok()) << bad;
    const std::string key = std::string(bad).substr(0, std::string(bad).find(':'));
    EXPECT_NE(e.message().find("agent.yaml: " + key), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace gpusched::agent
