// Replays every fixture of ../shared/k8s-extender/fixtures (manifest.json) through the
// extender: each request goes in, and the response is compared field by field where the
// protocol fixes it (keys, types, null vs object, the input Node objects handed back
// unchanged, NodeNames within the input) and, where the fixture's world can be rebuilt,
// read the way kube-scheduler reads it (PROTOCOL.md 4, 5.1) and compared with the
// manifest's schedulerInterpretation.
//
// The worlds: the gpumem fixtures were written against gpushare-inspect-response.json
// (per-GPU usage of the share-* nodes), which is loaded as bound pods. The nvidia-gpu ones
// have the H100 node full and gpu-a100-node-02 excluded; gpusched models no GPU health
// (Xid) signal, so that node is NotReady in the node cache instead, and in NodeList mode,
// where the request's Node objects are authoritative and say Ready, it passes.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "base/clock.h"
#include "extender/extender.h"
#include "extender/kube_cache.h"
#include "extender/testing/fake_kube_api.h"
#include "extender/testing/fixtures.h"

namespace gpusched::extender {
namespace {

using nlohmann::json;
using testing::FixtureNode;
using testing::FixturePod;
using testing::ReadFixture;

// Fixtures the replays below used; EveryManifestFixtureIsReplayed checks the list is whole.
std::set<std::string>& Replayed() {
  static std::set<std::string> files;
  return files;
}

std::string Use(const std::string& file) {
  Replayed().insert(file);
  return ReadFixture(file);
}

json Manifest() { return json::parse(ReadFixture("manifest.json")); }

json ManifestEntry(const std::string& file) {
  const json manifest = Manifest();
  for (const json& f : manifest["fixtures"]) {
    if (f["file"] == file) return f;
  }
  ADD_FAILURE() << file << " is not in manifest.json";
  return json::object();
}

struct Interpretation {
  std::set<std::string> passes, unschedulable, unresolvable;
  bool error = false;
  bool operator==(const Interpretation&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Interpretation& i) {
  const auto list = [&](const std::set<std::string>& s) {
    std::string out;
    for (const auto& n : s) out += n + " ";
    return out;
  };
  return os << "{passes: " << list(i.passes) << "| unschedulable: " << list(i.unschedulable)
            << "| unresolvable: " << list(i.unresolvable) << "| error: " << i.error << "}";
}

std::set<std::string> Keys(const json& map) {
  std::set<std::string> out;
  if (map.is_object()) {
    for (const auto& [k, v] : map.items()) out.insert(k);
  }
  return out;
}

// A filter response as kube-scheduler reads it (PROTOCOL.md 4 and 5.1).
Interpretation Interpret(const json& r, bool node_cache_capable) {
  Interpretation i;
  const auto get = [&](const char* key) { return r.contains(key) ? r[key] : json(); };
  if (get("Error").is_string() && !get("Error").get<std::string>().empty()) {
    i.error = true;
    return i;
  }
  i.unresolvable = Keys(get("FailedAndUnresolvableNodes"));
  for (const std::string& n : Keys(get("FailedNodes"))) {
    if (!i.unresolvable.count(n)) i.unschedulable.insert(n);
  }
  const json names = get("NodeNames");
  if (node_cache_capable && names.is_array()) {
    for (const json& n : names) i.passes.insert(n.get<std::string>());
  } else if (const json nodes = get("Nodes"); nodes.is_object()) {
    for (const json& item : nodes["items"]) i.passes.insert(item["metadata"]["name"]);
  }
  return i;
}

Interpretation FromManifest(const std::string& response_file) {
  const json in = ManifestEntry(response_file)["schedulerInterpretation"];
  Interpretation i;
  const auto set = [&](const char* key) {
    std::set<std::string> out;
    if (in.contains(key)) {
      for (const json& n : in[key]) out.insert(n.get<std::string>());
    }
    return out;
  };
  i.passes = set("passes");
  i.unschedulable = set("unschedulable");
  i.unresolvable = set("unschedulableAndUnresolvable");
  i.error = in.value("schedulingAttemptError", false);
  return i;
}

// The fields of a filter response the protocol fixes, whatever the decision.
void ExpectFilterShape(json r, json request, bool node_list) {
  EXPECT_EQ(Keys(r), (std::set<std::string>{"Nodes", "NodeNames", "FailedNodes",
                                            "FailedAndUnresolvableNodes", "Error"}));
  EXPECT_EQ(r["Error"], "");
  std::vector<std::string> input;
  const json nodes = request.contains("Nodes") ? request["Nodes"] : request["nodes"];
  if (nodes.is_object()) {
    for (const json& item : nodes["items"]) input.push_back(item["metadata"]["name"]);
  } else {
    const json names = request.contains("NodeNames") ? request["NodeNames"] : request["nodenames"];
    input = names.get<std::vector<std::string>>();
  }
  // NodeNames: an array of input names, in input order (kube-scheduler refuses others).
  ASSERT_TRUE(r["NodeNames"].is_array());
  size_t at = 0;
  for (const json& n : r["NodeNames"]) {
    while (at < input.size() && input[at] != n) ++at;
    EXPECT_LT(at, input.size()) << n << " is not in the input list (or out of order)";
  }
  for (const char* map : {"FailedNodes", "FailedAndUnresolvableNodes"}) {
    EXPECT_TRUE(r[map].is_null() || r[map].is_object()) << map;
    for (const auto& [node, reason] : r[map].items()) {
      EXPECT_TRUE(reason.is_string() && !reason.get<std::string>().empty()) << node;
      EXPECT_NE(std::find(input.begin(), input.end(), node), input.end()) << node;
    }
  }
  if (!node_list) {
    EXPECT_TRUE(r["Nodes"].is_null());
    return;
  }
  // NodeList mode: the input Node objects of the passing nodes, unchanged.
  ASSERT_TRUE(r["Nodes"].is_object());
  EXPECT_EQ(r["Nodes"]["metadata"], json::object());
  std::vector<json> expected;
  for (const json& item : nodes["items"]) {
    for (const json& n : r["NodeNames"]) {
      if (item["metadata"]["name"] == n) expected.push_back(item);
    }
  }
  EXPECT_EQ(r["Nodes"]["items"], json(expected));
}

// A cluster in the fake API and the extender's cache, filled from it.
struct World {
  FakeClock clock{1'784'535'362'481};
  testing::FakeKubeApi api{clock};
  KubeCache cache{ModelOptions{}, clock};
  Extender extender{ExtenderConfig{}, clock, &cache, &api};

  void Sync() {
    cache.ReplaceNodes(api.ListNodes()->items);
    cache.ReplacePods(api.ListPods()->items);
  }
  json Call(const std::string& verb, const std::string& body) {
    return json::parse(extender.HandleRequest(verb, body));
  }
};

// The share-* nodes with gpushare-inspect-response.json's usage, and the pending 8 GiB pod.
void ShareWorld(World& w) {
  for (const char* f : {"object-node-share-t4-node-01.json", "object-node-share-t4-node-02.json",
                        "object-node-share-v100-node-01.json"}) {
    Replayed().insert(f);
    w.api.PutNode(FixtureNode(f));
  }
  Replayed().insert("gpushare-inspect-response.json");
  for (KubePod& p : testing::GpushareInspectPods()) w.api.PutPod(p);
  Replayed().insert("object-pod-gpumem-8gib.json");
  w.api.PutPod(FixturePod("object-pod-gpumem-8gib.json"));
  w.Sync();
}

// The GPU nodes: H100 full (8 GPUs bound), gpu-a100-node-02 NotReady, and the 1-GPU pod.
void GpuWorld(World& w) {
  for (const char* f : {"object-node-gpu-a100-node-01.json", "object-node-gpu-a100-node-02.json",
                        "object-node-gpu-h100-node-01.json"}) {
    Replayed().insert(f);
    KubeNode n = FixtureNode(f);
    if (n.name == "gpu-a100-node-02") n.ready = false;
    w.api.PutNode(n);
  }
  w.api.PutPod(testing::BoundPod(testing::MakePod("pretrain-0", 8, 0, "ml-team"),
                                 "gpu-h100-node-01"));
  Replayed().insert("object-pod-nvidia-gpu-1.json");
  w.api.PutPod(FixturePod("object-pod-nvidia-gpu-1.json"));
  w.Sync();
}

// The preemption moment: each A100 node has 4 GPUs held by higher-priority pods and 4 by the
// victims (a on node 01; b and c on node 02).
void PreemptWorld(World& w, bool victims_free_gpus = true) {
  for (const char* f : {"object-node-gpu-a100-node-01.json", "object-node-gpu-a100-node-02.json"}) {
    Replayed().insert(f);
    w.api.PutNode(FixtureNode(f));
  }
  for (const char* node : {"gpu-a100-node-01", "gpu-a100-node-02"}) {
    KubePod hp = testing::BoundPod(testing::MakePod(std::string("hp-") + node, 4, 0, "ml-prod"),
                                   node, {0, 1, 2, 3});
    hp.priority = 2'000'000;
    w.api.PutPod(hp);
  }
  for (const char* f : {"object-pod-victim-a100-01-a.json", "object-pod-victim-a100-02-b.json",
                        "object-pod-victim-a100-02-c.json"}) {
    Replayed().insert(f);
    KubePod victim = FixturePod(f);
    if (!victims_free_gpus) victim.ask.whole_gpus = 0;  // they hold no GPU: evicting is useless
    w.api.PutPod(victim);
  }
  if (!victims_free_gpus) {
    for (const char* node : {"gpu-a100-node-01", "gpu-a100-node-02"}) {
      w.api.PutPod(testing::BoundPod(testing::MakePod(std::string("hp2-") + node, 4, 0), node));
    }
  }
  w.Sync();
}

void ReplayGpumemFilterNodeCacheReadsAsEveryPairedResponseDoes() {
  World w;
  ShareWorld(w);
  const std::string request = Use("filter-request.gpumem.nodecache.json");
  json r = w.Call("filter", request);
  ExpectFilterShape(r, json::parse(request), false);
  const Interpretation ours = Interpret(r, true);
  for (const char* f : {"filter-response.gpumem.nodecache.json",
                        "filter-response.gpumem.nodecache.minimal.json",
                        "filter-response.gpumem.gpushare-style.json"}) {
    EXPECT_EQ(ours, FromManifest(f)) << f;
    EXPECT_EQ(ours, Interpret(json::parse(Use(f)), true)) << f;
  }
  EXPECT_EQ(r["FailedAndUnresolvableNodes"], json());
  EXPECT_EQ(r["FailedNodes"]["share-t4-node-01"],
            "gpusched: insufficient GPU memory: no GPU has 8GiB free");
}

void ReplayLowercaseKeysGiveTheSameBytesAsPascalCase() {
  World w;
  ShareWorld(w);
  const std::string pascal = w.extender.HandleRequest("filter", ReadFixture("filter-request.gpumem.nodecache.json"));
  const std::string lower = w.extender.HandleRequest(
      "filter", Use("filter-request.gpumem.nodecache.lowercase-keys.json"));
  EXPECT_EQ(lower, pascal);
}

void ReplayGpumemFilterNodeListHandsBackTheInputNodesUnchanged() {
  for (const char* f : {"filter-request.gpumem.nodelist.json",
                        "filter-request.gpumem.nodelist.with-typemeta.json"}) {
    World w;
    ShareWorld(w);
    const std::string request = Use(f);
    json r = w.Call("filter", request);
    ExpectFilterShape(r, json::parse(request), true);
    const Interpretation ours = Interpret(r, false);
    EXPECT_EQ(ours, FromManifest("filter-response.gpumem.nodelist.json")) << f;
    EXPECT_EQ(ours, Interpret(json::parse(Use("filter-response.gpumem.nodelist.json")), false));
    EXPECT_EQ(ours, Interpret(json::parse(Use("filter-response.gpumem.gpushare-style.json")), false));
  }
}

void ReplayNvidiaGpuFilterNodeCacheFullNodeUnschedulableExcludedNodeUnresolvable() {
  World w;
  GpuWorld(w);
  const std::string request = Use("filter-request.nvidia-gpu.nodecache.json");
  json r = w.Call("filter", request);
  ExpectFilterShape(r, json::parse(request), false);
  const Interpretation ours = Interpret(r, true);
  EXPECT_EQ(ours, FromManifest("filter-response.nvidia-gpu.nodecache.json")) << ours;
  EXPECT_EQ(ours, Interpret(json::parse(Use("filter-response.nvidia-gpu.nodecache.json")), true));
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["gpu-a100-node-02"], "gpusched: node is not Ready");
}

void ReplayNvidiaGpuFilterNodeListTheRequestsNodeObjectsDecide() {
  World w;
  GpuWorld(w);
  const std::string request = Use("filter-request.nvidia-gpu.nodelist.json");
  json r = w.Call("filter", request);
  ExpectFilterShape(r, json::parse(request), true);
  Interpretation expected = FromManifest("filter-response.nvidia-gpu.nodelist.json");
  Interpretation fixture = Interpret(json::parse(Use("filter-response.nvidia-gpu.nodelist.json")), false);
  EXPECT_EQ(fixture, expected);
  // The request says gpu-a100-node-02 is Ready, and gpusched models no Xid health: it passes.
  expected.unresolvable.erase("gpu-a100-node-02");
  expected.passes.insert("gpu-a100-node-02");
  EXPECT_EQ(Interpret(r, false), expected);
}

void ReplayAllRejectedFullGpusAreUnschedulableAndANodeWithoutGpuMemoryUnresolvable() {
  World w;
  ShareWorld(w);
  KubeNode v100 = FixtureNode("object-node-share-v100-node-01.json");
  v100.gpushare_units_per_gpu = 0;  // not a GPU-share node: no GPU memory advertised
  v100.label_mib_per_gpu = 0;
  w.api.PutNode(v100);
  for (int dev = 0; dev < 4; ++dev) {  // leave 7 GiB on every GPU of share-t4-node-02
    KubePod p = testing::BoundPod(testing::MakePod("fill-" + std::to_string(dev), 0, 0),
                                  "share-t4-node-02", {dev});
    p.ask.gpushare_units = dev == 0 ? 4 : 8;
    w.api.PutPod(p);
  }
  w.Sync();
  json r = w.Call("filter", ReadFixture("filter-request.gpumem.nodecache.json"));
  EXPECT_EQ(Interpret(r, true), FromManifest("filter-response.all-rejected.nodecache.json"));
  EXPECT_EQ(Interpret(r, true),
            Interpret(json::parse(Use("filter-response.all-rejected.nodecache.json")), true));
  EXPECT_EQ(r["NodeNames"], json::array());
}

void ReplayErrorAnUnsyncedNodeCacheFailsTheAttemptWithEveryOtherFieldNull() {
  FakeClock clock;
  KubeCache cache(ModelOptions{}, clock);  // never listed
  Extender extender(ExtenderConfig{}, clock, &cache, nullptr);
  json r = json::parse(extender.HandleRequest("filter", ReadFixture("filter-request.gpumem.nodecache.json")));
  const json fixture = json::parse(Use("filter-response.error.json"));
  EXPECT_EQ(Keys(r), Keys(fixture));
  EXPECT_EQ(Interpret(r, true), FromManifest("filter-response.error.json"));
  for (const char* key : {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes"}) {
    EXPECT_TRUE(r[key].is_null()) << key;
  }
  EXPECT_NE(r["Error"].get<std::string>().find("not synced"), std::string::npos) << r["Error"];
}

// A prioritize answer: a bare array of {Host, Score}, one per input node in input order.
void ExpectPriorities(json r, json request, const json& fixture) {
  ASSERT_TRUE(r.is_array());
  std::vector<std::string> names;
  const json nodes = request["Nodes"];
  if (nodes.is_object()) {
    for (const json& item : nodes["items"]) names.push_back(item["metadata"]["name"]);
  } else {
    names = request["NodeNames"].get<std::vector<std::string>>();
  }
  ASSERT_EQ(r.size(), names.size());
  std::set<std::string> fixture_hosts;
  for (const json& e : fixture) fixture_hosts.insert(e["Host"]);
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(Keys(r[i]), (std::set<std::string>{"Host", "Score"}));
    EXPECT_EQ(r[i]["Host"], names[i]);
    EXPECT_TRUE(r[i]["Score"].is_number_integer());
    EXPECT_GE(r[i]["Score"].get<int64_t>(), 0);
    EXPECT_LE(r[i]["Score"].get<int64_t>(), 10);
    EXPECT_TRUE(fixture_hosts.count(names[i])) << names[i];
  }
}

void ReplayPrioritizeBareArrayOfInputHostsScored0To10() {
  {
    World w;
    ShareWorld(w);
    const json fixture = json::parse(Use("prioritize-response.gpumem.json"));
    for (const char* f : {"prioritize-request.gpumem.nodecache.json",
                          "prioritize-request.gpumem.nodelist.json"}) {
      const std::string request = Use(f);
      json r = w.Call("prioritize", request);
      ExpectPriorities(r, json::parse(request), fixture);
      // CN109992422A claim 4 (load balance), not gpushare's best fit: the emptier T4 node
      // (4 of 60 GiB used) outranks the V100 node the 8 GiB pod would fill.
      EXPECT_GT(r[0]["Score"].get<int64_t>(), r[1]["Score"].get<int64_t>()) << f;
    }
  }
  World w;
  GpuWorld(w);
  const std::string request = Use("prioritize-request.nvidia-gpu.nodecache.json");
  json r = w.Call("prioritize", request);
  ExpectPriorities(r, json::parse(request), json::parse(Use("prioritize-response.nvidia-gpu.json")));
  EXPECT_EQ(r[2]["Score"], 0);  // gpu-h100-node-01 is full
}

void ReplayBindGpumemAnnotatesLikeGpushareThenPostsTheBinding() {
  World w;
  ShareWorld(w);
  json r = w.Call("bind", Use("bind-request.gpumem.json"));
  EXPECT_EQ(r, json::parse(Use("bind-response.ok.json")));
  const auto patches = w.api.patches();
  ASSERT_EQ(patches.size(), 1u);
  const json patch = json::parse(Use("apiserver-pod-annotation-patch.gpumem.json"));
  for (const auto& [key, value] : patch["metadata"]["annotations"].items()) {
    ASSERT_TRUE(patches[0].annotations.count(key)) << key;
    if (key == "ALIYUN_COM_GPU_MEM_ASSUME_TIME") {
      EXPECT_EQ(patches[0].annotations.at(key), std::to_string(w.clock.NowMs() * 1'000'000));
    } else {
      EXPECT_EQ(patches[0].annotations.at(key), value) << key;
    }
  }
  EXPECT_EQ(patches[0].annotations.at("gpusched.io/gpu-indices"), "0");
  EXPECT_EQ(patches[0].annotations.at("gpusched.io/gpu-mem-mib"), "8192");
  const auto bindings = w.api.bindings();
  ASSERT_EQ(bindings.size(), 1u);
  const json binding = json::parse(Use("apiserver-binding.gpumem.json"));
  EXPECT_EQ(bindings[0].name, binding["metadata"]["name"]);
  EXPECT_EQ(bindings[0].ns, binding["metadata"]["namespace"]);
  EXPECT_EQ(bindings[0].uid, binding["metadata"]["uid"]);
  EXPECT_EQ(bindings[0].node, binding["target"]["name"]);
  // The pod as the API server now has it: bound, on GPU 0 (object-pod-gpumem-8gib-after-bind).
  const KubePod after = FixturePod("object-pod-gpumem-8gib-after-bind.json");
  Replayed().insert("object-pod-gpumem-8gib-after-bind.json");
  const auto pod = w.api.FindPod(after.uid);
  ASSERT_TRUE(pod.has_value());
  EXPECT_EQ(pod->node_name, after.node_name);
  EXPECT_EQ(pod->annotated_gpus, after.annotated_gpus);
}

void ReplayBindGpumemNoRoomLeftIsAnErrorOnlyResponse() {
  World w;
  ShareWorld(w);
  w.api.PutPod(testing::BoundPod(testing::MakePod("took-it", 0, 4096), "share-v100-node-01", {0}));
  w.Sync();
  json r = w.Call("bind", ReadFixture("bind-request.gpumem.json"));
  const json fixture = json::parse(Use("bind-response.error.json"));
  EXPECT_EQ(Keys(r), Keys(fixture));
  EXPECT_EQ(r["Error"].get<std::string>().rfind(
                "The node share-v100-node-01 can't place the pod inference/bert-infer-6c8d7f9b4-q9w7z",
                0),
            0u)
      << r["Error"];
  EXPECT_TRUE(w.api.bindings().empty());
}

void ReplayBindNvidiaGpuBinds() {
  World w;
  GpuWorld(w);
  EXPECT_EQ(w.Call("bind", Use("bind-request.nvidia-gpu.json")),
            json::parse(ReadFixture("bind-response.ok.json")));
  ASSERT_EQ(w.api.bindings().size(), 1u);
  EXPECT_EQ(w.api.bindings()[0].node, "gpu-a100-node-01");
}

void ReplayPreemptKeepsTheNodeWithFewestPdbViolationsAndItsMinimalVictims() {
  for (const char* f : {"preempt-request.nodecache.json", "preempt-request.nodelist.json"}) {
    World w;
    PreemptWorld(w);
    Replayed().insert("object-pod-preemptor-4gpu.json");
    EXPECT_EQ(w.Call("preempt", Use(f)), json::parse(Use("preempt-response.json"))) << f;
  }
}

void ReplayPreemptNoNodeWhenEvictingTheVictimsFreesNoGpu() {
  World w;
  PreemptWorld(w, /*victims_free_gpus=*/false);
  EXPECT_EQ(w.Call("preempt", ReadFixture("preempt-request.nodecache.json")),
            json::parse(Use("preempt-response.none.json")));
}

void ReplayWireCopiesGiveTheSameAnswersAsThePrettyOnes() {
  const json manifest = Manifest();
  for (const json& f : manifest["fixtures"]) {
    const std::string file = f["file"];
    if (f["role"] != "request") continue;
    const std::string wire = "wire/" + file.substr(0, file.size() - 5) + ".wire.json";
    if (file.find("lowercase") != std::string::npos) continue;  // no wire copy
    World a, b;
    if (file.find("gpumem") != std::string::npos) {
      ShareWorld(a);
      ShareWorld(b);
    } else if (file.find("preempt") != std::string::npos) {
      PreemptWorld(a);
      PreemptWorld(b);
    } else {
      GpuWorld(a);
      GpuWorld(b);
    }
    const std::string verb = f["verb"];
    // JSON-equal, not byte-equal: NodeList answers hand back the input objects as they came,
    // compact from the wire copy and indented from the pretty one.
    EXPECT_EQ(json::parse(a.extender.HandleRequest(verb, ReadFixture(wire))),
              json::parse(b.extender.HandleRequest(verb, ReadFixture(file))))
        << wire;
  }
  // Every wire response parses as the response it copies.
  for (const json& f : manifest["fixtures"]) {
    const std::string file = f["file"];
    if (f["role"] != "response") continue;
    const std::string wire = "wire/" + file.substr(0, file.size() - 5) + ".wire.json";
    if (file.find("minimal") != std::string::npos) continue;  // no wire copy
    EXPECT_EQ(json::parse(ReadFixture(wire)), json::parse(ReadFixture(file))) << wire;
  }
}

TEST(FixtureReplay, ObjectFixtures_ParseWithTheirGpuFields) {
  const KubeNode t4 = FixtureNode("object-node-share-t4-node-01.json");
  EXPECT_EQ(t4.gpu_count, 4);
  EXPECT_EQ(t4.gpushare_units_per_gpu, 15);
  EXPECT_EQ(t4.gpu_model, "Tesla-T4");
  const KubeNode a100 = FixtureNode("object-node-gpu-a100-node-01.json");
  EXPECT_EQ(a100.gpu_count, 8);
  EXPECT_EQ(a100.label_mib_per_gpu, 81920);
  ASSERT_EQ(a100.taints.size(), 1u);
  const KubePod preemptor = FixturePod("object-pod-preemptor-4gpu.json");
  EXPECT_EQ(preemptor.ask.whole_gpus, 4);
  EXPECT_EQ(preemptor.priority, 1'000'000);
  EXPECT_EQ(FixturePod("object-pod-gpumem-8gib.json").ask.gpushare_units, 8);
  EXPECT_EQ(FixturePod("object-pod-victim-a100-02-b.json").node_name, "gpu-a100-node-02");
}

TEST(FixtureReplay, GpumemFilterNodeCache_ReadsAsEveryPairedResponseDoes) { ReplayGpumemFilterNodeCacheReadsAsEveryPairedResponseDoes(); }
TEST(FixtureReplay, LowercaseKeys_GiveTheSameBytesAsPascalCase) { ReplayLowercaseKeysGiveTheSameBytesAsPascalCase(); }
TEST(FixtureReplay, GpumemFilterNodeList_HandsBackTheInputNodesUnchanged) { ReplayGpumemFilterNodeListHandsBackTheInputNodesUnchanged(); }
TEST(FixtureReplay, NvidiaGpuFilterNodeCache_FullNodeUnschedulableExcludedNodeUnresolvable) { ReplayNvidiaGpuFilterNodeCacheFullNodeUnschedulableExcludedNodeUnresolvable(); }
TEST(FixtureReplay, NvidiaGpuFilterNodeList_TheRequestsNodeObjectsDecide) { ReplayNvidiaGpuFilterNodeListTheRequestsNodeObjectsDecide(); }
TEST(FixtureReplay, AllRejected_FullGpusAreUnschedulableAndANodeWithoutGpuMemoryUnresolvable) { ReplayAllRejectedFullGpusAreUnschedulableAndANodeWithoutGpuMemoryUnresolvable(); }
TEST(FixtureReplay, Error_AnUnsyncedNodeCacheFailsTheAttemptWithEveryOtherFieldNull) { ReplayErrorAnUnsyncedNodeCacheFailsTheAttemptWithEveryOtherFieldNull(); }
TEST(FixtureReplay, Prioritize_BareArrayOfInputHostsScored0To10) { ReplayPrioritizeBareArrayOfInputHostsScored0To10(); }
TEST(FixtureReplay, BindGpumem_AnnotatesLikeGpushareThenPostsTheBinding) { ReplayBindGpumemAnnotatesLikeGpushareThenPostsTheBinding(); }
TEST(FixtureReplay, BindGpumem_NoRoomLeftIsAnErrorOnlyResponse) { ReplayBindGpumemNoRoomLeftIsAnErrorOnlyResponse(); }
TEST(FixtureReplay, BindNvidiaGpu_Binds) { ReplayBindNvidiaGpuBinds(); }
TEST(FixtureReplay, Preempt_KeepsTheNodeWithFewestPdbViolationsAndItsMinimalVictims) { ReplayPreemptKeepsTheNodeWithFewestPdbViolationsAndItsMinimalVictims(); }
TEST(FixtureReplay, Preempt_NoNodeWhenEvictingTheVictimsFreesNoGpu) { ReplayPreemptNoNodeWhenEvictingTheVictimsFreesNoGpu(); }
TEST(FixtureReplay, WireCopies_GiveTheSameAnswersAsThePrettyOnes) { ReplayWireCopiesGiveTheSameAnswersAsThePrettyOnes(); }

// Every file of manifest.json goes through one of the replays (each test runs in a process of
// its own under ctest, so this one runs them all).
TEST(FixtureReplay, EveryManifestFixtureIsReplayed) {
  ReplayGpumemFilterNodeCacheReadsAsEveryPairedResponseDoes();
  ReplayLowercaseKeysGiveTheSameBytesAsPascalCase();
  ReplayGpumemFilterNodeListHandsBackTheInputNodesUnchanged();
  ReplayNvidiaGpuFilterNodeCacheFullNodeUnschedulableExcludedNodeUnresolvable();
  ReplayNvidiaGpuFilterNodeListTheRequestsNodeObjectsDecide();
  ReplayAllRejectedFullGpusAreUnschedulableAndANodeWithoutGpuMemoryUnresolvable();
  ReplayErrorAnUnsyncedNodeCacheFailsTheAttemptWithEveryOtherFieldNull();
  ReplayPrioritizeBareArrayOfInputHostsScored0To10();
  ReplayBindGpumemAnnotatesLikeGpushareThenPostsTheBinding();
  ReplayBindGpumemNoRoomLeftIsAnErrorOnlyResponse();
  ReplayBindNvidiaGpuBinds();
  ReplayPreemptKeepsTheNodeWithFewestPdbViolationsAndItsMinimalVictims();
  ReplayPreemptNoNodeWhenEvictingTheVictimsFreesNoGpu();
  ReplayWireCopiesGiveTheSameAnswersAsThePrettyOnes();
  for (const std::string& file : testing::ManifestFiles()) {
    EXPECT_TRUE(Replayed().count(file)) << file << " is not replayed by any test";
  }
}

}  // namespace
}  // namespace gpusched::extender
