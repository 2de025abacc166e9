// Scenarios through HTTP on 127.0.0.1, as kube-scheduler calls the extender: POST
// <prefix>/<verb>, always 200, faults in the body.

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "base/clock.h"
#include "extender/extender_server.h"
#include "extender/testing/fake_kube_api.h"
#include "extender/testing/fixtures.h"

namespace gpusched::extender {
namespace {

using nlohmann::json;
using namespace testing;  // builders and kGiB of testing/fixtures.h

class ExtenderHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = ExtenderServer::Start(extender_, ServerOptions{"127.0.0.1:0", "/gpusched/"},
                                   [this] { return cache_.synced(); });
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  void Sync() {
    cache_.ReplaceNodes(api_.ListNodes()->items);
    cache_.ReplacePods(api_.ListPods()->items);
  }
  // POSTs and checks the protocol's "200 with a JSON body" before returning the body.
  json Post(const std::string& verb, const std::string& body) {
    auto res = client_->Post("/gpusched/" + verb, body, "application/json");
    EXPECT_TRUE(res) << "no answer for " << verb;
    if (!res) return json();
    EXPECT_EQ(res->status, 200) << verb;
    return json::parse(res->body);
  }
  std::string FilterBody(const KubePod& pod, const std::vector<std::string>& names) {
    json body = {{"Pod", json::parse(testing::PodJson(pod))}, {"Nodes", nullptr},
                 {"NodeNames", names}};
    return body.dump();
  }
  std::string BindBody(const KubePod& pod, const std::string& node) {
    return json{{"PodName", pod.name}, {"PodNamespace", pod.ns}, {"PodUID", pod.uid},
                {"Node", node}}
        .dump();
  }

  FakeClock clock_{1'000'000};
  testing::FakeKubeApi api_{clock_};
  KubeCache cache_{ModelOptions{}, clock_};
  Extender extender_{ExtenderConfig{}, clock_, &cache_, &api_};
  std::unique_ptr<ExtenderServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ExtenderHttpTest, CN109992422A_Claim1_NodeWithoutEnoughFreeGpuMemoryIsRejectedWithItsReason) {
  api_.PutNode(MakeNode("busy", 2, 16 * kGiB));
  api_.PutNode(MakeNode("roomy", 2, 16 * kGiB));
  api_.PutPod(BoundPod(MakePod("a", 0, 10 * kGiB), "busy", {0}));
  api_.PutPod(BoundPod(MakePod("b", 0, 12 * kGiB), "busy", {1}));
  Sync();
  const json r = Post("filter", FilterBody(MakePod("p", 0, 8 * kGiB), {"busy", "roomy"}));
  EXPECT_EQ(r["NodeNames"], json({"roomy"}));
  EXPECT_EQ(r["FailedNodes"], json({{"busy", "gpusched: insufficient GPU memory: no GPU has 8GiB free"}}));
  EXPECT_EQ(r["Error"], "");
}

TEST_F(ExtenderHttpTest, CN109992422A_Claim2_TwoPodsBoundInARowNeverShareMemoryPastAGpusCapacity) {
  api_.PutNode(MakeNode("n", 1, 16 * kGiB));
  const KubePod first = MakePod("first", 0, 10 * kGiB);
  const KubePod second = MakePod("second", 0, 10 * kGiB);
  api_.PutPod(first);
  api_.PutPod(second);
  Sync();
  // kube-scheduler filtered both before either was bound: both saw room on the node.
  EXPECT_EQ(Post("filter", FilterBody(second, {"n"}))["NodeNames"], json({"n"}));
  EXPECT_EQ(Post("bind", BindBody(first, "n"))["Error"], "");
  // No watch event has arrived yet; the first bind's reservation is visible at once.
  const json second_bind = Post("bind", BindBody(second, "n"));
  EXPECT_NE(second_bind["Error"].get<std::string>().find("can't place the pod default/second"),
            std::string::npos)
      << second_bind;
  EXPECT_EQ(api_.bindings().size(), 1u);
  EXPECT_EQ(Post("filter", FilterBody(second, {"n"}))["NodeNames"], json::array());
  // A smaller pod still shares the GPU (claim 2) and lands next to the first.
  const KubePod third = MakePod("third", 0, 6 * kGiB);
  api_.PutPod(third);
  EXPECT_EQ(Post("bind", BindBody(third, "n"))["Error"], "");
  EXPECT_EQ(api_.patches().back().annotations.at("gpusched.io/gpu-indices"), "0");
  cache_.Read([](const GpuCluster& c) {
    EXPECT_EQ(c.state().node(*c.Index("n")).gpus[0].allocated_mib, 16 * kGiB);
    EXPECT_TRUE(c.state().CheckInvariants().ok());
    return 0;
  });
}

TEST_F(ExtenderHttpTest, ConcurrentBindsToOneGpuNeverOvercommitIt) {
  api_.PutNode(MakeNode("n", 1, 16 * kGiB));
  std::vector<KubePod> pods;
  for (int i = 0; i < 8; ++i) {
    pods.push_back(MakePod("p" + std::to_string(i), 0, 4 * kGiB));
    api_.PutPod(pods.back());
  }
  Sync();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(pods.size());
  for (size_t i = 0; i < pods.size(); ++i) {
    threads.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server_->port());
      auto res = c.Post("/gpusched/bind", BindBody(pods[i], "n"), "application/json");
      errors[i] = res ? json::parse(res->body)["Error"].get<std::string>() : "no answer";
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::count(errors.begin(), errors.end(), ""), 4);  // 4 x 4 GiB = 16 GiB
  EXPECT_EQ(api_.bindings().size(), 4u);
}

TEST_F(ExtenderHttpTest, BindWritesTheAnnotationsThenTheBindingOfTheLivePod) {
  KubeNode node = MakeNode("n", 4, 16 * kGiB);
  node.gpushare_units_per_gpu = 16;
  api_.PutNode(node);
  api_.PutPod(BoundPod(MakePod("busy", 0, 12 * kGiB), "n", {0}));
  KubePod pod = MakePod("p", 0, 0, "team");
  pod.ask.gpushare_units = 8;  // aliyun.com/gpu-mem: 8 (GiB)
  api_.PutPod(pod);
  Sync();
  EXPECT_EQ(Post("bind", BindBody(pod, "n"))["Error"], "");
  const auto patches = api_.patches();
  ASSERT_EQ(patches.size(), 1u);
  const auto& a = patches[0].annotations;
  // Spread (CN109992422A claims 3-4): an empty GPU, not the busy GPU 0.
  EXPECT_EQ(a.at("gpusched.io/gpu-indices"), "1");
  EXPECT_EQ(a.at("gpusched.io/gpu-mem-mib"), "8192");
  EXPECT_EQ(a.at("ALIYUN_COM_GPU_MEM_IDX"), "1");
  EXPECT_EQ(a.at("ALIYUN_COM_GPU_MEM_POD"), "8");
  EXPECT_EQ(a.at("ALIYUN_COM_GPU_MEM_DEV"), "16");
  EXPECT_EQ(a.at("ALIYUN_COM_GPU_MEM_ASSIGNED"), "false");
  EXPECT_EQ(a.at("ALIYUN_COM_GPU_MEM_ASSUME_TIME"), "1000000000000");
  ASSERT_EQ(api_.bindings().size(), 1u);
  EXPECT_EQ(api_.bindings()[0].uid, pod.uid);
  EXPECT_EQ(api_.bindings()[0].node, "n");
  EXPECT_EQ(api_.FindPod(pod.uid)->node_name, "n");
}

TEST_F(ExtenderHttpTest, BindRefusesARecreatedPodAndForgetsFailedBinds) {
  api_.PutNode(MakeNode("n", 1, 16 * kGiB));
  const KubePod pod = MakePod("p", 0, 16 * kGiB);
  api_.PutPod(pod);
  Sync();
  api_.ReportUidOnce("stale-uid");  // one stale read: the re-read sees the real pod
  EXPECT_EQ(Post("bind", BindBody(pod, "n"))["Error"], "");
  // A real recreation: the live pod has another UID on every read.
  api_.DeletePod(pod.uid);
  KubePod recreated = pod;
  recreated.uid = "uid-recreated";
  recreated.node_name.clear();
  api_.PutPod(recreated);
  const json r = Post("bind", BindBody(pod, "n"));
  EXPECT_NE(r["Error"].get<std::string>().find("UID mismatch"), std::string::npos) << r;

  // A Binding the API server refuses leaves no reservation behind.
  api_.PutNode(MakeNode("m", 1, 16 * kGiB));
  Sync();
  const KubePod other = MakePod("other", 0, 16 * kGiB);
  api_.PutPod(other);
  api_.FailNextBinding(Unavailable("etcd timeout"));
  EXPECT_NE(Post("bind", BindBody(other, "m"))["Error"].get<std::string>().find("etcd timeout"),
            std::string::npos);
  EXPECT_EQ(Post("filter", FilterBody(other, {"m"}))["NodeNames"], json({"m"}));
  EXPECT_EQ(Post("bind", BindBody(other, "m"))["Error"], "");
}

TEST_F(ExtenderHttpTest, FaultsAreAnsweredWith200AndAnErrorOfTheVerbsShape) {
  Sync();
  for (const char* verb : {"filter", "bind"}) {
    const json r = Post(verb, "{not json");
    EXPECT_NE(r["Error"].get<std::string>().find("invalid JSON at byte 1"), std::string::npos)
        << verb << ": " << r;
  }
  EXPECT_EQ(Post("prioritize", "{not json"), json::array());
  EXPECT_EQ(Post("preempt", "{not json")["NodeNameToMetaVictims"], json::object());
  EXPECT_NE(Post("frobnicate", "{}")["Error"].get<std::string>().find("unknown verb"),
            std::string::npos);
  const json bad_name = Post("bind", R"({"PodName":"../x","PodNamespace":"ns","Node":"n"})");
  EXPECT_NE(bad_name["Error"].get<std::string>().find("is not a Kubernetes object name"),
            std::string::npos);
  auto health = client_->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = client_->Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
}

TEST_F(ExtenderHttpTest, PrioritizeRanksEmptierNodesHigher) {
  api_.PutNode(MakeNode("busy", 4, 16 * kGiB));
  api_.PutNode(MakeNode("idle", 4, 16 * kGiB));
  api_.PutPod(BoundPod(MakePod("x", 3, 0), "busy"));
  Sync();
  const json r = Post("prioritize", FilterBody(MakePod("p", 1, 0), {"busy", "idle"}));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["Host"], "busy");
  EXPECT_GT(r[1]["Score"].get<int>(), r[0]["Score"].get<int>());
}

TEST(ExtenderServerTest, UrlPrefixIsNormalizedAndListenIsChecked) {
  EXPECT_EQ(NormalizeUrlPrefix("/gpusched/"), "/gpusched");
  EXPECT_EQ(NormalizeUrlPrefix("gpusched"), "/gpusched");
  EXPECT_EQ(NormalizeUrlPrefix("/"), "");
  FakeClock clock;
  Extender e(ExtenderConfig{}, clock, nullptr, nullptr);
  auto bad = ExtenderServer::Start(e, ServerOptions{"127.0.0.1", "/x"});
  EXPECT_TRUE(bad.status().message().starts_with("--listen: \"127.0.0.1\" has no port"))
      << bad.status().message();
  auto s = ExtenderServer::Start(e, ServerOptions{"127.0.0.1:0", "/a.b"});
  ASSERT_TRUE(s.ok());
  httplib::Client c("127.0.0.1", (*s)->port());
  auto literal = c.Post("/a.b/bind", "{}", "application/json");
  ASSERT_TRUE(literal);
  EXPECT_EQ(literal->status, 200);
  auto regex_dot = c.Post("/aXb/bind", "{}", "application/json");  // '.' is no wildcard
  ASSERT_TRUE(regex_dot);
  EXPECT_EQ(regex_dot->status, 404);
}

}  // namespace
}  // namespace gpusched::extender
