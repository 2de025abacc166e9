// `gpusched bench extender [--nodes N] [--requests R] [--seed S] [--json]`: filter and
// prioritize latency of the kube-scheduler extender over HTTP on loopback, in both modes:
//   nodeCache  the request names the candidates; nodes and pods come from the extender's cache
//   nodeList   the request carries every candidate Node object (about 3 KB each, shaped like
//              `kubectl get node -o json` of a GPU node), handed back in the filter answer
// Every node is a candidate (kube-scheduler sends fewer on large clusters), every node has 8
// GPUs of 80 GiB, and a seeded mix of whole-GPU and shared pods occupies part of them. The
// pods asking alternate between 1 whole GPU and 8 GiB of one GPU. Latency is measured by the
// client, from sending the request to having the whole answer.

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <httplib.h>

#include "base/clock.h"
#include "base/percentile.h"
#include "base/rng.h"
#include "cli/commands.h"
#include "cli/usage_errors.h"
#include "extender/extender_server.h"
#include "extender/json_reader.h"
#include "extender/json_writer.h"

namespace gpusched::cli {
namespace {

using extender::JsonWriter;

constexpr int kGpusPerNode = 8;
constexpr MiB kGpuMib = 80 * 1024;

std::string NodeName(int64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "gpu-node-%05lld", static_cast<long long>(i));
  return buf;
}

void StringMap(JsonWriter& w, std::initializer_list<std::pair<std::string, std::string>> kv) {
  w.BeginObject();
  for (const auto& [k, v] : kv) w.Key(k).String(v);
  w.EndObject();
}

// The node's metadata: name, uid, labels (GPU feature discovery's too), annotations.
void NodeMetadata(JsonWriter& w, int64_t i, const std::string& name, const std::string& gpus) {
  w.BeginObject();
  w.Key("name").String(name).Key("uid").String("4f1a8c8e-2a5d-4a9b-b15c-" + std::to_string(100000000000 + i));
  w.Key("resourceVersion").String(std::to_string(48200000 + i));
  w.Key("creationTimestamp").String("2026-04-28T09:02:37Z").Key("labels");
  StringMap(w, {{"beta.kubernetes.io/arch", "amd64"}, {"beta.kubernetes.io/instance-type", "p4de.24xlarge"},
                {"beta.kubernetes.io/os", "linux"}, {"kubernetes.io/arch", "amd64"},
                {"kubernetes.io/hostname", name}, {"kubernetes.io/os", "linux"},
                {"node.kubernetes.io/instance-type", "p4de.24xlarge"},
                {"nvidia.com/cuda.driver.major", "550"}, {"nvidia.com/cuda.driver.minor", "90"},
                {"nvidia.com/gpu.count", gpus}, {"nvidia.com/gpu.family", "ampere"},
                {"nvidia.com/gpu.memory", std::to_string(kGpuMib)}, {"nvidia.com/gpu.present", "true"},
                {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}, {"nvidia.com/mig.capable", "true"},
                {"topology.kubernetes.io/region", "us-west-2"},
                {"topology.kubernetes.io/zone", i % 2 ? "us-west-2a" : "us-west-2b"}});
  w.Key("annotations");
  StringMap(w, {{"node.alpha.kubernetes.io/ttl", "0"},
                {"volumes.kubernetes.io/controller-managed-attach-detach", "true"}});
  w.EndObject();
}

// The node's status: capacity, conditions, addresses, kubelet and images.
void NodeStatus(JsonWriter& w, int64_t i, const std::string& name, const std::string& gpus,
                const std::string& mem) {
  w.BeginObject();
  for (const char* section : {"capacity", "allocatable"}) {
    w.Key(section);
    StringMap(w, {{"cpu", "96"}, {"ephemeral-storage", "7812500000Ki"}, {"hugepages-1Gi", "0"},
                  {"hugepages-2Mi", "0"}, {"memory", "1176512552Ki"}, {"nvidia.com/gpu", gpus},
                  {"gpusched.io/gpu-mem", mem}, {"pods", "110"}});
  }
  w.Key("conditions").BeginArray();
  for (const auto& [type, status, reason] :
       {std::tuple{"MemoryPressure", "False", "KubeletHasSufficientMemory"},
        std::tuple{"DiskPressure", "False", "KubeletHasNoDiskPressure"},
        std::tuple{"PIDPressure", "False", "KubeletHasSufficientPID"},
        std::tuple{"Ready", "True", "KubeletReady"}}) {
    StringMap(w, {{"type", type}, {"status", status}, {"lastHeartbeatTime", "2026-07-20T08:14:58Z"},
                  {"lastTransitionTime", "2026-05-11T02:13:45Z"}, {"reason", reason},
                  {"message", std::string("kubelet reports ") + reason}});
  }
  w.EndArray().Key("addresses").BeginArray();
  StringMap(w, {{"type", "InternalIP"}, {"address", "10.20." + std::to_string(i / 250) + "." + std::to_string(i % 250)}});
  StringMap(w, {{"type", "Hostname"}, {"address", name}});
  w.EndArray();
  w.Key("daemonEndpoints").Raw(R"({"kubeletEndpoint":{"Port":10250}})");
  w.Key("nodeInfo");
  StringMap(w, {{"machineID", "ec2a9f3c1d2e4b5a6978c0d1e2f3a4b5"}, {"systemUUID", "ec2a9f3c-1d2e-4b5a-6978-c0d1e2f3a4b5"},
                {"bootID", "3f2e1d0c-9b8a-4765-8432-10fedcba9876"}, {"kernelVersion", "5.15.0-1063-aws"},
                {"osImage", "Ubuntu 22.04.4 LTS"}, {"containerRuntimeVersion", "containerd://1.7.19"},
                {"kubeletVersion", "v1.30.3"}, {"kubeProxyVersion", "v1.30.3"},
                {"operatingSystem", "linux"}, {"architecture", "amd64"}});
  w.Key("images").BeginArray();
  w.Raw(R"({"names":["nvcr.io/nvidia/pytorch@sha256:4f8e2b9a7c1d3e5f6a8b0c2d4e6f8a0b2c4d6e8f0a2b4c6d8e0f2a4b6c8d0e2f","nvcr.io/nvidia/pytorch:24.05-py3"],"sizeBytes":9852347121})");
  w.Raw(R"({"names":["nvcr.io/nvidia/k8s-device-plugin@sha256:0585da349f3cdca29747834e39ada56aed5e23ba363908fc526474d25aa61a75","nvcr.io/nvidia/k8s-device-plugin:v0.15.0"],"sizeBytes":125693442})");
  w.EndArray().EndObject();
}

// A GPU node as kubelet v1.30 and GPU feature discovery publish it.
std::string NodeObject(int64_t i) {
  const std::string name = NodeName(i);
  const std::string gpus = std::to_string(kGpusPerNode);
  const std::string mem = std::to_string(kGpusPerNode * kGpuMib);
  JsonWriter w;
  w.BeginObject().Key("metadata");
  NodeMetadata(w, i, name, gpus);
  w.Key("spec").BeginObject().Key("podCIDR").String("172.16.0.0/24");
  w.Key("taints").BeginArray();
  StringMap(w, {{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}});
  w.EndArray().EndObject();
  w.Key("status");
  NodeStatus(w, i, name, gpus, mem);
  w.EndObject();
  return w.Take();
}

std::string PodObject(const std::string& name, const std::string& node, int64_t whole_gpus,
                      MiB shared_mib, const std::vector<int>& gpus) {
  JsonWriter w;
  w.BeginObject().Key("metadata").BeginObject().Key("name").String(name);
  w.Key("namespace").String("bench").Key("uid").String("uid-" + name);
  if (!gpus.empty()) {
    w.Key("annotations").BeginObject().Key("gpusched.io/gpu-indices")
        .String(extender::FormatGpuIndices(gpus)).EndObject();
  }
  w.EndObject().Key("spec").BeginObject();
  if (!node.empty()) w.Key("nodeName").String(node);
  w.Key("tolerations").BeginArray();
  StringMap(w, {{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}});
  w.EndArray().Key("containers").BeginArray().BeginObject().Key("name").String("main");
  w.Key("resources").BeginObject().Key("limits").BeginObject();
  if (whole_gpus > 0) w.Key("nvidia.com/gpu").String(std::to_string(whole_gpus));
  if (shared_mib > 0) w.Key("gpusched.io/gpu-mem").String(std::to_string(shared_mib));
  w.EndObject().EndObject().EndObject().EndArray().EndObject();
  w.Key("status").BeginObject().Key("phase").String(node.empty() ? "Pending" : "Running");
  w.EndObject().EndObject();
  return w.Take();
}

struct Cluster {
  std::vector<std::string> node_json;
  std::vector<std::string> pod_json;
};

// Each node: maybe a whole-GPU job on its first GPUs, then shared pods on the others.
Cluster MakeCluster(int64_t nodes, Rng& rng) {
  Cluster c;
  for (int64_t i = 0; i < nodes; ++i) {
    c.node_json.push_back(NodeObject(i));
    const std::string node = NodeName(i);
    int next_gpu = 0;
    if (rng.Bernoulli(0.5)) {
      const int whole = static_cast<int>(rng.UniformInt(1, 4));
      std::vector<int> gpus;
      for (int g = 0; g < whole; ++g) gpus.push_back(next_gpu++);
      c.pod_json.push_back(PodObject(node + "-train", node, whole, 0, gpus));
    }
    const int64_t shared = rng.UniformInt(0, 3);
    for (int64_t s = 0; s < shared && next_gpu < kGpusPerNode; ++s) {
      const MiB mib = rng.UniformInt(4, 40) * 1024;
      c.pod_json.push_back(PodObject(node + "-infer-" + std::to_string(s), node, 0, mib, {next_gpu++}));
    }
  }
  return c;
}

struct Latency {
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

Latency Percentiles(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {Percentile(ms, 50), Percentile(ms, 99), Percentile(ms, 100)};
}

struct ModeResult {
  std::string mode;
  size_t request_bytes = 0;
  int64_t passed = 0;  // nodes passing the last filter
  Latency filter, prioritize;
};

ModeResult RunMode(const std::string& mode, const std::vector<std::string>& bodies, int port,
                   int64_t requests, Clock& clock) {
  httplib::Client client("127.0.0.1", port);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);  // as Go's net/http, kube-scheduler's client, does
  client.set_read_timeout(60, 0);
  ModeResult r;
  r.mode = mode;
  r.request_bytes = bodies[0].size();
  std::vector<double> filter_ms, prioritize_ms;
  const int64_t warmup = 5;
  for (int64_t i = 0; i < requests + warmup; ++i) {
    const std::string& body = bodies[static_cast<size_t>(i) % bodies.size()];
    for (const char* verb : {"filter", "prioritize"}) {
      const int64_t t0 = clock.NowNs();
      auto res = client.Post(std::string("/gpusched/") + verb, body, "application/json");
      const double ms = static_cast<double>(clock.NowNs() - t0) / 1e6;
      if (!res || res->status != 200) {
        Fail(std::string("bench extender: ") + verb + " failed", kExitFailure);
      }
      if (i < warmup) continue;
      (std::string(verb) == "filter" ? filter_ms : prioritize_ms).push_back(ms);
      if (std::string(verb) == "filter" && i + 1 == requests + warmup) {
        auto doc = extender::JsonDoc::Parse(res->body, "filter answer");
        if (doc.ok()) r.passed = static_cast<int64_t>(doc->root().Get("NodeNames").size());
      }
    }
  }
  r.filter = Percentiles(filter_ms);
  r.prioritize = Percentiles(prioritize_ms);
  return r;
}

void PrintJson(int64_t nodes, int64_t requests, uint64_t seed, const std::vector<ModeResult>& modes) {
  JsonWriter w;
  w.BeginObject().Key("nodes").Int(nodes).Key("gpus_per_node").Int(kGpusPerNode);
  w.Key("requests").Int(requests).Key("seed").Int(static_cast<int64_t>(seed)).Key("modes").BeginArray();
  char buf[32];
  const auto ms = [&](double v) {
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return std::string(buf);
  };
  for (const ModeResult& m : modes) {
    w.BeginObject().Key("mode").String(m.mode).Key("request_bytes").Int(static_cast<int64_t>(m.request_bytes));
    w.Key("nodes_passing").Int(m.passed);
    for (const auto& [name, l] : {std::pair{"filter", m.filter}, std::pair{"prioritize", m.prioritize}}) {
      w.Key(name).BeginObject().Key("p50_ms").Raw(ms(l.p50_ms)).Key("p99_ms").Raw(ms(l.p99_ms));
      w.Key("max_ms").Raw(ms(l.max_ms)).EndObject();
    }
    w.EndObject();
  }
  w.EndArray().EndObject();
  std::cout << w.str() << "\n";
}

void RunBench(int64_t nodes, int64_t requests, uint64_t seed, bool json) {
  Rng rng(seed);
  const Cluster cluster = MakeCluster(nodes, rng);
  RealClock clock;
  extender::KubeCache cache(extender::ModelOptions{}, clock);
  {
    std::vector<extender::KubeNode> parsed_nodes;
    for (const std::string& j : cluster.node_json) {
      parsed_nodes.push_back(*extender::ParseNode(extender::JsonDoc::Parse(j, "node")->root()));
    }
    std::vector<extender::KubePod> parsed_pods;
    for (const std::string& j : cluster.pod_json) {
      parsed_pods.push_back(*extender::ParsePod(extender::JsonDoc::Parse(j, "pod")->root()));
    }
    cache.ReplaceNodes(parsed_nodes);
    cache.ReplacePods(parsed_pods);
  }
  extender::Extender ext(extender::ExtenderConfig{}, clock, &cache, nullptr);
  auto server = extender::ExtenderServer::Start(ext, extender::ServerOptions{"127.0.0.1:0", "/gpusched"});
  if (!server.ok()) {
    Fail("bench extender: " + server.status().message(), kExitFailure);
  }
  const std::vector<std::string> pods = {PodObject("ask-whole", "", 1, 0, {}),
                                         PodObject("ask-shared", "", 0, 8 * 1024, {})};
  std::vector<std::string> cache_bodies, list_bodies;
  for (const std::string& pod : pods) {
    std::string names = "[";
    std::string items;
    for (int64_t i = 0; i < nodes; ++i) {
      names += (i ? ",\"" : "\"") + NodeName(i) + "\"";
      items += (i ? "," : "") + cluster.node_json[static_cast<size_t>(i)];
    }
    cache_bodies.push_back("{\"Pod\":" + pod + ",\"Nodes\":null,\"NodeNames\":" + names + "]}");
    list_bodies.push_back("{\"Pod\":" + pod + ",\"Nodes\":{\"metadata\":{},\"items\":[" + items +
                          "]},\"NodeNames\":null}");
  }
  std::vector<ModeResult> modes;
  modes.push_back(RunMode("nodeCache", cache_bodies, (*server)->port(), requests, clock));
  modes.push_back(RunMode("nodeList", list_bodies, (*server)->port(), requests, clock));
  (*server)->Stop();
  if (json) {
    PrintJson(nodes, requests, seed, modes);
    return;
  }
  std::printf("%lld nodes x %d GPUs, %lld requests per verb and mode, seed %llu\n",
              static_cast<long long>(nodes), kGpusPerNode, static_cast<long long>(requests),
              static_cast<unsigned long long>(seed));
  std::printf("%-10s %12s %8s %22s %22s\n", "mode", "request", "passing", "filter p50/p99 ms",
              "prioritize p50/p99 ms");
  for (const ModeResult& m : modes) {
    std::printf("%-10s %10zu B %8lld %10.3f / %-9.3f %10.3f / %-9.3f\n", m.mode.c_str(),
                m.request_bytes, static_cast<long long>(m.passed), m.filter.p50_ms,
                m.filter.p99_ms, m.prioritize.p50_ms, m.prioritize.p99_ms);
  }
}

}  // namespace

void RegisterBenchExtender(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("extender", "Filter and prioritize latency of the kube-scheduler extender");
  auto nodes = std::make_shared<int64_t>(1000);
  auto requests = std::make_shared<int64_t>(200);
  auto seed = std::make_shared<uint64_t>(42);
  auto json = std::make_shared<bool>(false);
  cmd->add_option("--nodes", *nodes, "Candidate nodes per request")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100'000}));
  cmd->add_option("--requests", *requests, "Measured requests per verb and mode")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  cmd->add_option("--seed", *seed, "Seed of the cluster's pods")->capture_default_str();
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->callback([=] { RunBench(*nodes, *requests, *seed, *json); });
}

}  // namespace gpusched::cli
