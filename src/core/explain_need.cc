#include "core/explain_need.h"

#include <algorithm>

#include "base/units.h"
#include "core/node_rules.h"

namespace gpusched::core {
namespace {

bool TakesWork(const NodeState& n) {
  return n.reachable && n.available && !n.cordoned && !n.draining;
}

// Why a node takes no new work, in `nodes`' words.
std::string WhyNoWork(const NodeState& n) {
  if (n.draining) return "draining";
  if (n.cordoned) return "cordoned";
  return n.available ? "unreachable" : "unavailable";
}

std::string Plural(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string DescribeNeed(const ClusterState& cluster, const PlacementRequest& r,
                         const FilterOptions& o) {
  if (r.gpus <= 0) return "";
  const std::string model = r.model_id >= 0 ? cluster.ModelName(r.model_id) + " " : "";
  // The node with the most GPUs that fit one share, and the single GPU with the most free
  // memory (ties: the first node, then the lowest index).
  const NodeState* best_node = nullptr;
  int64_t best_fits = -1;
  const NodeState* roomiest_node = nullptr;
  int roomiest_gpu = -1;
  MiB roomiest_free = -1;
  for (size_t i = 0; i < cluster.size(); ++i) {
    const NodeState& n = cluster.node(i);
    if (!TakesWork(n)) continue;
    int64_t fits = 0;
    for (const GpuState& g : n.gpus) {
      if (r.model_id >= 0 && g.model_id != r.model_id) continue;
      if (GpuFits(g, r, o)) ++fits;
      if (EffectiveFree(g, o) > roomiest_free) {
        roomiest_free = EffectiveFree(g, o);
        roomiest_node = &n;
        roomiest_gpu = g.index;
      }
    }
    if (fits > best_fits) {
      best_fits = fits;
      best_node = &n;
    }
  }
  if (best_node == nullptr) {
    return "needs " + Plural(r.gpus, model + "GPU", model + "GPUs") +
           "; no node takes new work now";
  }
  const std::string most = "; " + best_node->name + " has " + std::to_string(best_fits);
  if (r.exclusive) {
    return "needs " + Plural(r.gpus, "free " + model + "GPU", "free " + model + "GPUs") +
           " on one node" + most;
  }
  std::string out = "needs " + FormatSizeMiB(r.gpu_mem_mib) +
                    (r.gpus == 1 ? " on one " + model + "GPU"
                                 : " on each of " + std::to_string(r.gpus) + " " + model +
                                       "GPUs of one node" + most + " such GPUs");
  if (roomiest_node != nullptr) {
    out += "; most free is " + FormatSizeMiB(std::max<MiB>(0, roomiest_free)) + " on " +
           roomiest_node->name + " GPU " + std::to_string(roomiest_gpu);
  }
  return out;
}

std::string DescribeRules(const ClusterState& cluster, const PlacementRequest& r) {
  const bool has_selector = r.node_selector != nullptr && !r.node_selector->empty();
  const NodeState* tainted = nullptr;  // the first matching node (by name) with a bad taint
  const NodeState* idle_match = nullptr;  // the first matching node that takes no work now
  bool any_takes_work = false, any_matches = false;
  for (size_t i = 0; i < cluster.size(); ++i) {
    const NodeState& n = cluster.node(i);
    if (!TakesWork(n)) {
      if (has_selector && MatchesSelector(n.labels, r.node_selector) &&
          (idle_match == nullptr || n.name < idle_match->name)) {
        idle_match = &n;
      }
      continue;
    }
    any_takes_work = true;
    if (has_selector && !MatchesSelector(n.labels, r.node_selector)) continue;
    any_matches = true;
    if (ToleratesAll(n.taints, r.tolerations)) return "";
    if (tainted == nullptr || n.name < tainted->name) tainted = &n;
  }
  if (!any_matches) {
    if (!any_takes_work) return "";  // DescribeNeed and the filter counts say so
    std::string terms;
    for (const auto& [key, value] : *r.node_selector) {
      terms += (terms.empty() ? "" : ",") + key + "=" + value;
    }
    // A matching node that is cordoned (or draining, or away) is the reason, not the labels.
    if (idle_match != nullptr) {
      return "the node selector " + terms + " matches " + idle_match->name + ", which is " +
             WhyNoWork(*idle_match) + ", and no node that takes new work";
    }
    return "no node matches the node selector " + terms;
  }
  for (const Taint& t : tainted->taints) {
    if (ToleratesAll({t}, r.tolerations)) continue;
    return "every node left has a taint the task does not tolerate: " + tainted->name +
           " has " + FormatTaint(t) + " (submit with --toleration " + FormatTaint(t) + ")";
  }
  return "";
}

}  // namespace gpusched::core
