#pragma once
// The kube-scheduler extender wire types (k8s.io/kube-scheduler/extender/v1, PROTOCOL.md 3):
// request parsing and response writing.
//
// Requests: protocol keys are matched the way Go decodes untagged fields (exact, then
// case-insensitive: "NodeNames" = "nodenames"), null equals missing, unknown keys are ignored.
// The embedded Pod and Node objects are ordinary Kubernetes JSON (kube_objects.h).
// Responses: PascalCase keys; maps with keys sorted, as Go's encoding/json writes them.
// Errors name the field: `filter request: NodeNames[2]: expected a string, got 7`.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "extender/decisions.h"
#include "extender/json_reader.h"
#include "extender/kube_objects.h"

namespace gpusched::extender {

// ExtenderArgs: the body of filter and prioritize.
struct ExtenderArgs {
  KubePod pod;
  // NodeList mode (nodeCacheCapable: false): the candidate Node objects, parsed and raw.
  bool node_list = false;
  std::vector<KubeNode> nodes;
  std::vector<std::string_view> node_json;  // each item's bytes, to hand back unchanged
  // The candidate names: NodeNames in nodeCache mode, the items' names in NodeList mode.
  std::vector<std::string> names;
};

// REQUIRES: `doc` outlives the result (node_json points into its text).
StatusOr<ExtenderArgs> ParseExtenderArgs(const JsonDoc& doc, std::string_view what);

// ExtenderBindingArgs.
struct BindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};
StatusOr<BindingArgs> ParseBindingArgs(const JsonDoc& doc);

// ExtenderPreemptionArgs: the proposals of either mode as VictimSets (victims by UID).
struct PreemptionArgs {
  KubePod pod;
  std::vector<VictimSet> proposals;  // ascending node name
};
StatusOr<PreemptionArgs> ParsePreemptionArgs(const JsonDoc& doc);

// ExtenderFilterResult. `node_json` (NodeList mode) fills Nodes with those objects; else
// Nodes is null. NodeNames is always written (possibly []), so the answer works under both
// nodeCacheCapable settings.
struct FilterResult {
  std::vector<std::string> passed;
  std::vector<std::string_view> passed_json;  // NodeList mode: the passing items' bytes
  bool node_list = false;
  std::map<std::string, std::string> failed;
  std::map<std::string, std::string> unresolvable;
};
std::string WriteFilterResult(const FilterResult& result);
std::string WriteFilterError(std::string_view error);

// HostPriorityList: a bare array.
std::string WritePriorities(const std::vector<HostScore>& scores);

// ExtenderBindingResult.
std::string WriteBindingResult(std::string_view error);

// ExtenderPreemptionResult. kube-scheduler's type has no Error field; a non-empty `error`
// is written as an extra "Error" key (ignored by Go's decoder, visible to whoever reads the
// body) next to an empty NodeNameToMetaVictims, which means "no preemption".
std::string WritePreemptionResult(const std::vector<VictimSet>& victims,
                                  std::string_view error = "");

}  // namespace gpusched::extender
