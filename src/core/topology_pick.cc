#include "core/topology_pick.h"

#include <algorithm>
#include <utility>

namespace gpusched::core {
namespace {

bool WholeFree(const GpuState& g) { return g.healthy && g.tasks == 0 && g.allocated_mib == 0; }

std::string Join(const std::vector<int>& gpus) {
  std::string out;
  for (int g : gpus) out += (out.empty() ? "" : ",") + std::to_string(g);
  return out;
}

// The NVLink island of `gpu`: the GPUs it reaches over NVLink, itself included.
std::vector<int> Island(const GpuTopology& t, int gpu) {
  std::vector<int> island{gpu};
  for (size_t i = 0; i < island.size(); ++i) {
    for (int g = 0; g < t.gpus; ++g) {
      if (t.link(island[i], g) == GpuLink::kNvLink &&
          std::find(island.begin(), island.end(), g) == island.end()) {
        island.push_back(g);
      }
    }
  }
  std::sort(island.begin(), island.end());
  return island;
}

// True when taking `gpu` would break up an NVLink island (a pair, a quad) that is wholly
// free and smaller than the node (on an all-NVLink node nothing is broken up).
bool BreaksFreeIsland(const NodeState& node, int gpu, std::vector<int>* island) {
  *island = Island(node.topology, gpu);
  if (island->size() < 2 || static_cast<int>(island->size()) >= node.topology.gpus) return false;
  for (int g : *island) {
    if (!WholeFree(node.gpus[static_cast<size_t>(g)])) return false;
  }
  return true;
}

// (weakest link, sum of links) over the pairs of `set`: higher is better connected.
std::pair<int, int> Connectivity(const GpuTopology& t, const std::vector<int>& set) {
  int weakest = kGpuLinkLevels, sum = 0;
  for (size_t i = 0; i < set.size(); ++i) {
    for (size_t j = i + 1; j < set.size(); ++j) {
      const int l = static_cast<int>(t.link(set[i], set[j]));
      weakest = std::min(weakest, l);
      sum += l;
    }
  }
  return {weakest, sum};
}

// Grows a set from `seed`: each step adds the GPU of `order` with the strongest weakest link
// to the set, then the largest sum of links, then the earliest in `order`.
std::vector<int> GrowFrom(const GpuTopology& t, const std::vector<int>& order, size_t seed,
                          size_t want) {
  std::vector<int> set{order[seed]};
  while (set.size() < want) {
    int best = -1;
    std::pair<int, int> best_key{-1, -1};
    for (int g : order) {
      if (std::find(set.begin(), set.end(), g) != set.end()) continue;
      std::pair<int, int> key{kGpuLinkLevels, 0};
      for (int m : set) {
        const int l = static_cast<int>(t.link(g, m));
        key.first = std::min(key.first, l);
        key.second += l;
      }
      if (key > best_key) {
        best_key = key;
        best = g;
      }
    }
    set.push_back(best);
  }
  return set;
}

}  // namespace

std::vector<int> PickByTopology(const NodeState& node, const std::vector<int>& order,
                                int64_t want, std::string* rule) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(want, 0));
  std::vector<int> plain(order.begin(), order.begin() + static_cast<long>(std::min(n, order.size())));
  std::sort(plain.begin(), plain.end());
  const GpuTopology& t = node.topology;
  if (t.empty() || order.size() < n || n == 0) return plain;
  if (n == 1) {
    std::vector<int> island;
    if (!BreaksFreeIsland(node, order[0], &island)) return plain;
    for (int g : order) {
      std::vector<int> other;
      if (BreaksFreeIsland(node, g, &other)) continue;
      if (rule != nullptr) {
        *rule = "topology: single-GPU task on GPU " + std::to_string(g) + ", keeping the free " +
                "NVLink group " + Join(island) + " whole";
      }
      return {g};
    }
    return plain;  // every GPU that fits would break a group up
  }
  std::vector<int> best = plain;
  std::pair<int, int> best_key = Connectivity(t, plain);
  for (size_t seed = 0; seed < order.size(); ++seed) {
    std::vector<int> set = GrowFrom(t, order, seed, n);
    std::sort(set.begin(), set.end());
    const std::pair<int, int> key = Connectivity(t, set);
    if (key > best_key) {
      best_key = key;
      best = std::move(set);
    }
  }
  if (best != plain && rule != nullptr) {
    *rule = "topology: GPUs " + Join(best) + " joined by " +
            GpuLinkName(static_cast<GpuLink>(best_key.first)) + " (the emptiest GPUs " +
            Join(plain) + " by " +
            GpuLinkName(static_cast<GpuLink>(Connectivity(t, plain).first)) + ")";
  }
  return best;
}

}  // namespace gpusched::core
