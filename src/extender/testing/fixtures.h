#pragma once
// Test support: the shared kube-scheduler extender fixtures (../shared/k8s-extender, found
// through GPUSCHED_K8S_EXTENDER_DIR) and builders of nodes and pods.

#include <string>
#include <vector>

#include "extender/kube_objects.h"

namespace gpusched::extender::testing {

inline constexpr MiB kGiB = 1024;

// The bytes of fixtures/<name> (or fixtures/wire/<name> for "wire/..."); aborts the test
// binary with a message naming the path when it cannot be read.
std::string ReadFixture(const std::string& name);
// Every file named in fixtures/manifest.json, in manifest order.
std::vector<std::string> ManifestFiles();

// A Node / Pod fixture object (object-node-*.json, object-pod-*.json), parsed.
KubeNode FixtureNode(const std::string& name);
KubePod FixturePod(const std::string& name);

// The pods that hold GPU memory on the share-* nodes in gpushare-inspect-response.json, as
// bound pods with gpushare annotations (ALIYUN_COM_GPU_MEM_IDX) and aliyun.com/gpu-mem asks:
// the state the gpumem filter, prioritize and bind fixtures were written against.
std::vector<KubePod> GpushareInspectPods();

// A node with `gpus` GPUs of `mib` MiB each, advertised as nvidia.com/gpu and
// gpusched.io/gpu-mem (the total), model `model`, Ready.
KubeNode MakeNode(const std::string& name, int gpus, MiB mib, const std::string& model = "A100");
// A pending pod asking for `whole_gpus` GPUs or `shared_mib` MiB of one GPU.
KubePod MakePod(const std::string& name, int64_t whole_gpus, MiB shared_mib,
                const std::string& ns = "default");
// The pod bound to `node`, optionally with bind annotations for `gpus`.
KubePod BoundPod(KubePod pod, const std::string& node, std::vector<int> gpus = {});

// The JSON of a Node / Pod as the API server would send it (the fields the extender reads).
std::string NodeJson(const KubeNode& node);
std::string PodJson(const KubePod& pod);

}  // namespace gpusched::extender::testing
