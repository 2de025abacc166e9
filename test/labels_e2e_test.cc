// Labels, taints, node selectors and tolerations end to end (CN115981827A claim 1, Kubernetes
// rules), with the real binaries: `gpusched agent --label/--taint` registers them, `nodes`
// shows them, `submit --selector/--toleration` places by them, `why` names the rule that
// leaves a task waiting, and the nodes' rules survive a server restart.

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {


Json NodeNamed(const Json& nodes, const std::string& name) {
  for (const Json& n : nodes) {
    if (n["name"] == name) return n;
  }
  return Json::object();
}

TEST_F(ClusterTest, CN115981827A_Claim1_LabelsAndTaintsPlaceTasksEndToEnd) {
  StartAgent("infer", "1x16GiB",
             {"--label", "zone=a", "--label", "gpusched.io/gpu=a100", "--taint",
              "dedicated=infer:NoSchedule", "--taint", "spot:PreferNoSchedule"});
  StartAgent("train", "1x16GiB", {"--label", "zone=b"});

  const Json nodes = Json::parse(Run({"nodes", "--json"}).out);
  const Json infer = NodeNamed(nodes, "infer");
  EXPECT_EQ(infer["labels"], (Json{{"gpusched.io/gpu", "a100"}, {"zone", "a"}})) << infer;
  EXPECT_EQ(infer["taints"],
            (Json::array({Json{{"key", "dedicated"}, {"value", "infer"}, {"effect", "NoSchedule"}},
                          Json{{"key", "spot"}, {"value", ""}, {"effect", "PreferNoSchedule"}}})))
      << infer;
  EXPECT_EQ(NodeNamed(nodes, "train")["taints"], Json::array());
  const std::string table = Run({"nodes"}).out;
  EXPECT_TRUE(Has(table, "LABELS")) << table;
  EXPECT_TRUE(Has(table, "gpusched.io/gpu=a100,zone=a")) << table;
  EXPECT_TRUE(Has(table, "dedicated=infer:NoSchedule,spot:PreferNoSchedule")) << table;

  // A selector picks the labelled node; the taint lets only tolerating tasks onto it.
  const uint64_t on_a = Submit({"--gpu-mem", "1GiB", "--selector", "zone=a", "--toleration",
                                "dedicated=infer:NoSchedule", "--", "true"});
  const uint64_t on_b = Submit({"--gpu-mem", "1GiB", "--selector", "zone=b", "--", "true"});
  ASSERT_TRUE(WaitState(on_a, "succeeded")) << Run({"why", std::to_string(on_a)}).out;
  ASSERT_TRUE(WaitState(on_b, "succeeded"));
  EXPECT_EQ(Task(on_a)["node"], "infer");
  EXPECT_EQ(Task(on_b)["node"], "train");
  EXPECT_EQ(Task(on_a)["request"]["node_selector"], (Json{{"zone", "a"}}));
  EXPECT_EQ(Task(on_a)["request"]["tolerations"][0]["effect"], "NoSchedule");

  // No node matches: it waits, and `why` says which rule.
  const uint64_t nowhere = Submit({"--gpu-mem", "1GiB", "--selector", "zone=c", "--", "true"});
  ASSERT_TRUE(PollUntil(
      [&] {
        return Has(Run({"why", std::to_string(nowhere)}).out,
                   "no node matches the node selector zone=c");
      },
      kDeadline))
      << Run({"why", std::to_string(nowhere)}).out;
  // The tainted node is the only one with the label: the taint is named, with the fix.
  const uint64_t untolerated = Submit({"--gpu-mem", "1GiB", "--selector", "zone=a", "--", "true"});
  ASSERT_TRUE(PollUntil(
      [&] {
        return Has(Task(untolerated).value("reason", ""),
                   "infer has dedicated=infer:NoSchedule (submit with --toleration "
                   "dedicated=infer:NoSchedule)");
      },
      kDeadline))
      << Task(untolerated).dump();
  EXPECT_EQ(Task(nowhere)["state"], "pending");
  EXPECT_EQ(Task(untolerated)["state"], "pending");

  // The rules live with the node in the store: after a restart, before its agent is back,
  // `nodes` still shows them.
  agents_.at("infer")->Kill(SIGKILL);
  server_.Kill(SIGKILL);
  StartServer();
  const Json restored = NodeNamed(Json::parse(Run({"nodes", "--json"}).out), "infer");
  EXPECT_EQ(restored["labels"], (Json{{"gpusched.io/gpu", "a100"}, {"zone", "a"}})) << restored;
  EXPECT_EQ(restored["taints"].size(), 2u) << restored;
  EXPECT_EQ(restored["taints"][0]["key"], "dedicated") << restored;
}

// The same rules from `gpusched agent --config FILE`: the file's labels and taints, a flag's
// label winning over the file's for the same key.
TEST_F(ClusterTest, AgentConfigFileCarriesLabelsAndTaints) {
  WriteFile(path("agent.yaml"),
            "labels: {zone: a, rack: r1}\n"
            "taints: [dedicated=infer:NoSchedule, {key: spot, effect: PreferNoSchedule}]\n");
  StartAgent("cfg", "1x16GiB", {"--config", path("agent.yaml"), "--label", "zone=b"});
  const Json n = NodeNamed(Json::parse(Run({"nodes", "--json"}).out), "cfg");
  EXPECT_EQ(n["labels"], (Json{{"rack", "r1"}, {"zone", "b"}})) << n;
  ASSERT_EQ(n["taints"].size(), 2u) << n;
  EXPECT_EQ(n["taints"][0]["key"], "dedicated");
  EXPECT_EQ(n["taints"][1]["effect"], "PreferNoSchedule");
  // Without --server, here or in the file: a usage error, not a default address.
  CliResult r = Cli({"agent", "--name", "x", "--config", path("agent.yaml")});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(Has(r.err, "--server: missing")) << r.err;
  WriteFile(path("bad.yaml"), "taints: [a=b:Sometimes]\n");
  r = Run({"agent", "--name", "x", "--config", path("bad.yaml")});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(Has(r.err, path("bad.yaml") + ": taints[0]: \"a=b:Sometimes\": unknown effect"))
      << r.err;
}

TEST_F(ClusterTest, BadLabelTaintSelectorAndTolerationFlagsAreUsageErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"agent", "--name", "x", "--label", "=x"}, "--label: \"=x\": the key is empty"},
      {{"agent", "--name", "x", "--taint", "a=b:Sometimes"},
       "--taint: \"a=b:Sometimes\": unknown effect \"Sometimes\""},
      {{"agent", "--name", "x", "--taint", "a=b"}, "--taint: \"a=b\": not KEY=VALUE:EFFECT"},
      {{"agent", "--name", "x", "--label", "a=1", "--label", "a=2"},
       "--label: \"a=2\": the key a is given twice"},
      {{"submit", "--selector", "zone", "--", "true"}, "--selector: \"zone\": not KEY=VALUE"},
      {{"submit", "--toleration", "a=b:Sometimes", "--", "true"},
       "--toleration: \"a=b:Sometimes\": unknown effect \"Sometimes\""},
  };
  for (const Case& c : cases) {
    CliResult r = Run(c.args);
    EXPECT_EQ(r.code, 2) << c.args[3] << " " << c.args[4] << ": " << r.err;
    EXPECT_TRUE(Has(r.err, c.message)) << r.err;
  }
  // A spec file that sets a selector already: the flag would silently override it.
  WriteFile(path("job.yaml"), "node_selector: {zone: a}\ncommand: [\"true\"]\n");
  CliResult r = Run({"submit", "-f", path("job.yaml"), "--selector", "zone=b"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(Has(r.err, "--selector: " + path("job.yaml") + " sets node_selector already"))
      << r.err;
  // Nothing was submitted by any of them.
  EXPECT_TRUE(Tasks().empty());
}

}  // namespace
}  // namespace gpusched::testing
