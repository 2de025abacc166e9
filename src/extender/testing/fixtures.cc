#include "extender/testing/fixtures.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "extender/json_reader.h"
#include "extender/json_writer.h"

namespace gpusched::extender::testing {
namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "extender fixtures: %s\n", message.c_str());
  std::abort();
}

std::string TaintEffectName(core::TaintEffect e) {
  switch (e) {
    case core::TaintEffect::kPreferNoSchedule: return "PreferNoSchedule";
    case core::TaintEffect::kNoExecute: return "NoExecute";
    default: return "NoSchedule";
  }
}

void WriteStringMap(JsonWriter& w, const std::map<std::string, std::string>& m) {
  w.BeginObject();
  for (const auto& [k, v] : m) w.Key(k).String(v);
  w.EndObject();
}

}  // namespace

std::string ReadFixture(const std::string& name) {
  const std::string path = std::string(GPUSCHED_K8S_EXTENDER_DIR) + "/fixtures/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) Die("cannot read " + path + " (is ../shared next to the repository?)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> ManifestFiles() {
  static const std::string text = ReadFixture("manifest.json");
  auto doc = JsonDoc::Parse(text, "manifest.json");
  if (!doc.ok()) Die(doc.status().ToString());
  std::vector<std::string> files;
  doc->root().Get("fixtures").ForEachItem([&](JsonValue f) {
    files.push_back(f.Get("file").StringOr());
    return true;
  });
  return files;
}

KubeNode FixtureNode(const std::string& name) {
  const std::string text = ReadFixture(name);
  auto doc = JsonDoc::Parse(text, name);
  if (!doc.ok()) Die(doc.status().ToString());
  auto node = ParseNode(doc->root());
  if (!node.ok()) Die(node.status().ToString());
  return *node;
}

KubePod FixturePod(const std::string& name) {
  const std::string text = ReadFixture(name);
  auto doc = JsonDoc::Parse(text, name);
  if (!doc.ok()) Die(doc.status().ToString());
  auto pod = ParsePod(doc->root());
  if (!pod.ok()) Die(pod.status().ToString());
  return *pod;
}

std::vector<KubePod> GpushareInspectPods() {
  const std::string text = ReadFixture("gpushare-inspect-response.json");
  auto doc = JsonDoc::Parse(text, "gpushare-inspect-response.json");
  if (!doc.ok()) Die(doc.status().ToString());
  std::vector<KubePod> pods;
  doc->root().Get("nodes").ForEachItem([&](JsonValue node) {
    const std::string node_name = node.Get("name").StringOr();
    node.Get("devs").ForEachItem([&](JsonValue dev) {
      const int id = static_cast<int>(dev.Get("id").Int().value_or(0));
      dev.Get("pods").ForEachItem([&](JsonValue p) {
        KubePod pod;
        pod.name = p.Get("name").StringOr();
        pod.ns = p.Get("namespace").StringOr();
        pod.uid = "uid-" + pod.name;
        pod.node_name = node_name;
        pod.phase = "Running";
        pod.ask.gpushare_units = p.Get("usedGPU").Int().value_or(0);
        pod.annotated_gpus = {id};
        pods.push_back(std::move(pod));
        return true;
      });
      return true;
    });
    return true;
  });
  return pods;
}

KubeNode MakeNode(const std::string& name, int gpus, MiB mib, const std::string& model) {
  KubeNode n;
  n.name = name;
  n.uid = "uid-" + name;
  n.labels[std::string(names::kLabelGpuModel)] = model;
  n.gpu_model = model;
  n.gpu_count = gpus;
  n.resource_mib_per_gpu = mib;
  return n;
}

KubePod MakePod(const std::string& name, int64_t whole_gpus, MiB shared_mib,
                const std::string& ns) {
  KubePod p;
  p.name = name;
  p.ns = ns;
  p.uid = "uid-" + ns + "-" + name;
  p.phase = "Pending";
  p.ask.whole_gpus = whole_gpus;
  p.ask.shared_mib = shared_mib;
  return p;
}

KubePod BoundPod(KubePod pod, const std::string& node, std::vector<int> gpus) {
  pod.node_name = node;
  pod.phase = "Running";
  pod.annotated_gpus = std::move(gpus);
  return pod;
}

std::string NodeJson(const KubeNode& n) {
  JsonWriter w;
  w.BeginObject().Key("metadata").BeginObject();
  w.Key("name").String(n.name).Key("uid").String(n.uid);
  if (!n.resource_version.empty()) w.Key("resourceVersion").String(n.resource_version);
  std::map<std::string, std::string> labels = n.labels;
  if (n.label_mib_per_gpu > 0) {
    labels[std::string(names::kLabelGfdMemory)] = std::to_string(n.label_mib_per_gpu);
  }
  if (!n.gpu_model.empty() && labels.count(std::string(names::kLabelGpuModel)) == 0) {
    labels[std::string(names::kLabelGfdProduct)] = n.gpu_model;
  }
  w.Key("labels");
  WriteStringMap(w, labels);
  w.EndObject();
  w.Key("spec").BeginObject().Key("taints").BeginArray();
  for (const core::Taint& t : n.taints) {
    w.BeginObject().Key("key").String(t.key).Key("value").String(t.value);
    w.Key("effect").String(TaintEffectName(t.effect)).EndObject();
  }
  w.EndArray().EndObject();
  std::map<std::string, std::string> alloc{{"cpu", "64"}, {"memory", "512Gi"}};
  if (n.gpu_count > 0) {
    alloc[std::string(names::kNvidiaGpu)] = std::to_string(n.gpu_count);
    if (n.resource_mib_per_gpu > 0) {
      alloc[std::string(names::kGpuMem)] = std::to_string(n.resource_mib_per_gpu * n.gpu_count);
    }
    if (n.gpushare_units_per_gpu > 0) {
      alloc[std::string(names::kGpushareMem)] =
          std::to_string(n.gpushare_units_per_gpu * n.gpu_count);
      alloc[std::string(names::kGpushareCount)] = std::to_string(n.gpu_count);
    }
  }
  w.Key("status").BeginObject().Key("allocatable");
  WriteStringMap(w, alloc);
  w.Key("capacity");
  WriteStringMap(w, alloc);
  w.Key("conditions").BeginArray().BeginObject().Key("type").String("Ready");
  w.Key("status").String(n.ready ? "True" : "False").EndObject().EndArray();
  w.EndObject().EndObject();
  return w.Take();
}

std::string PodJson(const KubePod& p) {
  JsonWriter w;
  w.BeginObject().Key("metadata").BeginObject();
  w.Key("name").String(p.name).Key("namespace").String(p.ns).Key("uid").String(p.uid);
  if (!p.resource_version.empty()) w.Key("resourceVersion").String(p.resource_version);
  std::map<std::string, std::string> annotations;
  if (!p.annotated_gpus.empty()) {
    annotations[std::string(names::kAnnGpuIndices)] = FormatGpuIndices(p.annotated_gpus);
  }
  if (!p.ask.model.empty()) annotations[std::string(names::kAnnGpuModel)] = p.ask.model;
  w.Key("annotations");
  WriteStringMap(w, annotations);
  w.EndObject();
  w.Key("spec").BeginObject();
  if (!p.node_name.empty()) w.Key("nodeName").String(p.node_name);
  w.Key("priority").Int(p.priority);
  w.Key("nodeSelector");
  WriteStringMap(w, p.node_selector);
  std::map<std::string, std::string> requests{{"cpu", "1"}};
  if (p.ask.whole_gpus > 0) requests[std::string(names::kNvidiaGpu)] = std::to_string(p.ask.whole_gpus);
  if (p.ask.shared_mib > 0) requests[std::string(names::kGpuMem)] = std::to_string(p.ask.shared_mib);
  if (p.ask.gpushare_units > 0) {
    requests[std::string(names::kGpushareMem)] = std::to_string(p.ask.gpushare_units);
  }
  w.Key("containers").BeginArray().BeginObject().Key("name").String("main");
  w.Key("resources").BeginObject().Key("requests");
  WriteStringMap(w, requests);
  w.Key("limits");
  WriteStringMap(w, requests);
  w.EndObject().EndObject().EndArray();
  w.EndObject();
  w.Key("status").BeginObject().Key("phase").String(p.phase).EndObject();
  w.EndObject();
  return w.Take();
}

}  // namespace gpusched::extender::testing
