#include "extender/protocol.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpusched::extender {
namespace {

using nlohmann::json;

constexpr const char* kPod = R"({"metadata":{"name":"p","namespace":"ns","uid":"u"}})";

StatusOr<ExtenderArgs> Args(const std::string& body, std::unique_ptr<JsonDoc>& keep) {
  auto doc = JsonDoc::Parse(body, "filter request");
  if (!doc.ok()) return doc.status();
  keep = std::make_unique<JsonDoc>(std::move(doc).value());
  return ParseExtenderArgs(*keep, "filter request");
}

TEST(Protocol, KeysAreCaseInsensitiveNullIsMissingAndUnknownKeysAreIgnored) {
  std::unique_ptr<JsonDoc> keep;
  auto a = Args(std::string(R"({"pod":)") + kPod +
                    R"(,"NODES":null,"nodeNames":["n1","n2"],"Extra":{"x":[1]}})",
                keep);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_FALSE(a->node_list);
  EXPECT_EQ(a->names, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(a->pod.Key(), "ns/p");
}

TEST(Protocol, BadRequestsNameTheField) {
  std::unique_ptr<JsonDoc> keep;
  const std::pair<std::string, std::string> cases[] = {
      {R"({"NodeNames":["a"]})", "filter request: Pod: missing"},
      {std::string(R"({"Pod":)") + kPod + "}", "neither Nodes nor NodeNames is set"},
      {std::string(R"({"Pod":)") + kPod + R"(,"NodeNames":["a",7]})",
       "filter request: NodeNames[1]: expected a string, got 7"},
      {std::string(R"({"Pod":)") + kPod + R"(,"NodeNames":"a"})",
       "filter request: NodeNames: expected an array"},
      {std::string(R"({"Pod":)") + kPod + R"(,"Nodes":{"items":[{"metadata":{}}]}})",
       "filter request: Nodes.items[0]: node: metadata.name is missing"},
      {R"({"Pod":{"metadata":{}},"NodeNames":[]})", "filter request: Pod: pod: metadata.name is missing"},
      {"[]", "filter request: expected a JSON object"},
  };
  for (const auto& [body, message] : cases) {
    auto a = Args(body, keep);
    ASSERT_FALSE(a.ok()) << body;
    EXPECT_NE(a.status().message().find(message), std::string::npos)
        << body << " -> " << a.status().message();
  }
}

TEST(Protocol, BindingAndPreemptionArgsDecodeBothSpellings) {
  auto doc = JsonDoc::Parse(R"({"podname":"p","PodNamespace":"ns","poduid":"u","node":"n"})", "b");
  auto b = ParseBindingArgs(*doc);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->pod_uid, "u");
  EXPECT_EQ(b->node, "n");
  auto missing = JsonDoc::Parse(R"({"PodName":"p","PodNamespace":"ns","Node":null})", "b");
  EXPECT_EQ(ParseBindingArgs(*missing).status().message(), "bind request: Node: missing or empty");
  const std::string preempt_body =
      std::string(R"({"Pod":)") + kPod +
      R"(,"nodenametometavictims":{"n2":{"pods":[{"uid":"a"}],"numpdbviolations":2},"n1":{"Pods":[]}}})";
  auto preempt = JsonDoc::Parse(preempt_body, "p");  // the doc views the body: keep it
  auto p = ParsePreemptionArgs(*preempt);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->proposals.size(), 2u);
  EXPECT_EQ(p->proposals[0].node, "n1");
  EXPECT_EQ(p->proposals[1].victim_uids, (std::vector<std::string>{"a"}));
  EXPECT_EQ(p->proposals[1].pdb_violations, 2);
  const std::string bad_body = std::string(R"({"Pod":)") + kPod +
                               R"(,"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":""}]}}})";
  auto bad = JsonDoc::Parse(bad_body, "p");
  EXPECT_EQ(ParsePreemptionArgs(*bad).status().message(),
            "preempt request: NodeNameToMetaVictims[\"n1\"].Pods[0]: has no UID");
}

TEST(Protocol, ResponsesArePascalCaseWithSortedMapsAndNullForEmpty) {
  FilterResult r;
  r.passed = {"b", "a"};
  r.failed = {{"z", "full"}, {"c", "full"}};
  EXPECT_EQ(WriteFilterResult(r),
            R"({"Nodes":null,"NodeNames":["b","a"],"FailedNodes":{"c":"full","z":"full"},)"
            R"("FailedAndUnresolvableNodes":null,"Error":""})");
  r.node_list = true;
  r.passed_json = {R"({"metadata":{"name":"b"}})", R"({"metadata":{"name":"a"}})"};
  EXPECT_EQ(json::parse(WriteFilterResult(r))["Nodes"],
            json::parse(R"({"metadata":{},"items":[{"metadata":{"name":"b"}},{"metadata":{"name":"a"}}]})"));
  EXPECT_EQ(WritePriorities({{"n1", 3}, {"n0", 10}}),
            R"([{"Host":"n1","Score":3},{"Host":"n0","Score":10}])");
  EXPECT_EQ(WritePriorities({}), "[]");
  EXPECT_EQ(WriteBindingResult(""), R"({"Error":""})");
  EXPECT_EQ(WritePreemptionResult({{"n2", {"u2"}, 1}, {"n1", {"u1", "u0"}, 0}}),
            R"({"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"u1"},{"UID":"u0"}],"NumPDBViolations":0},)"
            R"("n2":{"Pods":[{"UID":"u2"}],"NumPDBViolations":1}}})");
  EXPECT_EQ(WritePreemptionResult({}, "bad"), R"({"NodeNameToMetaVictims":{},"Error":"bad"})");
  EXPECT_EQ(json::parse(WriteFilterError("boom")),
            json::parse(R"({"Nodes":null,"NodeNames":null,"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":"boom"})"));
}

}  // namespace
}  // namespace gpusched::extender
