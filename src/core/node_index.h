#pragma once
// Issue 43: the node index that lets a placement look at candidates instead of every node.
//
// Kept current by ClusterState on every summary refresh:
//   class   nodes in exactly the same placement state: the summary (but the name), capacity,
//           reservations, every GPU, labels and taints. Every filter says the same of them and
//           every scorer gives them the same value, so of a class only its first member by
//           name can win a decision (ties go to the lowest name); the others need no look.
//   group   classes of nodes with the same capacities (CPU, RAM, GPU memory, GPU sizes).
//   bucket  within a group, classes with the same whole free GPUs, free-GPU-memory level,
//           spread level and direction sector of their used fractions, ordered by `used`
//           (the mean used fraction of CPU, RAM and GPU memory), each with what the scorers
//           read of its nodes, in one array a walk reads in order.
// A request looks only at the buckets whose nodes may have its GPUs. For each bucket,
// Placer::IndexedBest bounds the weighted score of any node in it that passes the filters by
// c0 - c1 x used (placement_index.cc derives it), so the walk goes down the buckets from the
// highest bound and stops once every bound left is below the best score found; a class whose
// own score (from its entry) is below the best is passed over without reading its nodes. The
// node the full scan picks, with the same tie by name (node_index_test compares both).
//
// Thread-safety: none; const methods may be called concurrently when no thread mutates.

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/node.h"
#include "core/scorers.h"

namespace gpusched::core {

class NodeIndex {
 public:
  // What groups share: the capacities the score bound and the buckets read.
  struct GroupKey {
    int64_t cpu = 0, mem = 0;
    MiB gpu_total = 0, min_gpu = 0, max_gpu = 0;  // a whole-GPU request takes >= min_gpu each
    int32_t gpus = 0;
    auto operator<=>(const GroupKey&) const = default;
  };
  // Free GPU memory in levels of max_gpu / kLevels: a class's level is that of the most free
  // memory one of its GPUs has (0 .. kLevels).
  static constexpr int kLevels = 8;
  // The spread (standard deviation) of a node's used fractions falls in one of these ranges:
  // [kSpreadEdges[i - 1], kSpreadEdges[i]) is level i (from 0; the last is open).
  static constexpr double kSpreadEdges[] = {0.005, 0.01, 0.02, 0.03, 0.05,
                                            0.08,  0.12, 0.18, 0.26};
  static constexpr int kSpreads = static_cast<int>(std::size(kSpreadEdges)) + 1;
  static int SpreadLevel(double spread);
  static std::pair<double, double> SpreadRange(int level);  // [low, high]
  // On nodes with CPU, RAM and GPU memory, the direction of the used fractions away from
  // their mean (a vector in the plane where the three sum to 0) falls in one of kSectors
  // equal sectors of the circle: sector i spans [SectorStart(i), SectorStart(i + 1)).
  static constexpr int kSectors = 8;
  static double SectorStart(int sector);
  static int SectorOf(double angle);
  // The angle of (f - mean f) in that plane, in [-pi, pi).
  static double Direction(const double f[3]);

  // What the bound reads of a node's used fractions before placement: their mean, standard
  // deviation and, with all three kinds, direction (0 otherwise).
  struct Usage {
    double used = 0, spread = 0, angle = 0;
    int kinds = 0;
  };
  static Usage UsageOf(const NodeSummary& s);

  struct Class {
    uint64_t hash = 0;
    uint32_t group = 0;
    uint32_t bucket = 0;
    uint32_t first = 0;  // the member first by name: the one a tie would choose
    double used = 0;     // mean used fraction of CPU, RAM and GPU memory (UsageOf)
    std::set<std::pair<std::string, uint32_t>> members;  // (name, node index), name order
  };
  // A class as a bucket lists it: what the scorers read of its nodes, so a walk can score it
  // without its nodes (Placer::IndexedBest), and its `used` for the bound.
  struct Entry {
    double used = 0;
    uint32_t id = 0;  // the class
    ScoreInputs in;   // ScoreInputsOf any member's summary: the same for all of them
  };
  // Classes by (used, id), least used first; contiguous, so a walk reads it in order.
  using Bucket = std::vector<Entry>;
  struct Group {
    GroupKey key;
    double inv_cpu = 0, inv_mem = 0, inv_gpu_mem = 0;
    // Bucket (whole free GPUs w, free level l, spread level s, sector d) at
    // ((w x (kLevels + 1) + l) x kSpreads + s) x kSectors + d: a request for g whole GPUs
    // looks only at buckets with w >= g, one for g shares of m MiB only at levels >= Level(m)
    // (a node there may have a GPU with m free; below, none has).
    std::unordered_map<uint32_t, Bucket> buckets;  // the non-empty ones only
    int Level(MiB free) const;
    static uint32_t BucketOf(int whole_free, int level, int spread, int sector) {
      return static_cast<uint32_t>(((whole_free * (kLevels + 1) + level) * kSpreads + spread) *
                                       kSectors +
                                   sector);
    }
    static int WholeFree(uint32_t b) { return static_cast<int>(b / kSectors / kSpreads / (kLevels + 1)); }
    static int FreeLevel(uint32_t b) { return static_cast<int>(b / kSectors / kSpreads % (kLevels + 1)); }
    static int Spread(uint32_t b) { return static_cast<int>(b / kSectors % kSpreads); }
    static int Sector(uint32_t b) { return static_cast<int>(b % kSectors); }
  };

  // Node `index` changed (or is new): moves it to the class of its state now.
  void Update(const std::vector<NodeState>& nodes, const std::vector<NodeSummary>& summaries,
              size_t index);
  // Nodes `changed` (each once) changed since their last Update: moves them all.
  void UpdateMany(const std::vector<NodeState>& nodes, const std::vector<NodeSummary>& summaries,
                  const std::vector<size_t>& changed);
  // Every node again (after a removal renumbered them).
  void Rebuild(const std::vector<NodeState>& nodes, const std::vector<NodeSummary>& summaries);

  const std::vector<Group>& groups() const { return groups_; }
  const Class& cls(uint32_t id) const { return classes_[id]; }
  size_t class_count() const { return classes_.size() - free_.size(); }
  // The class of node `index` (for tests and invariant checks).
  uint32_t ClassOf(size_t index) const { return class_of_[index]; }

  // Every node sits in exactly one class, with nodes of its own state only.
  bool Consistent(const std::vector<NodeState>& nodes,
                  const std::vector<NodeSummary>& summaries) const;

  // Whether two nodes are in the same placement state (all but the name).
  static bool SameState(const NodeState& a, const NodeSummary& as, const NodeState& b,
                        const NodeSummary& bs);

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  void Leave(size_t index, const std::string& name);
  // Puts node `index` (in no class) in the class of its state, a new one if none has it.
  void Join(const std::vector<NodeState>& nodes, const std::vector<NodeSummary>& summaries,
            size_t index);
  // Whether node `index` is unchanged for placement: still in the state of another member of
  // its class (Update then has nothing to do).
  bool StillInItsClass(const std::vector<NodeState>& nodes,
                       const std::vector<NodeSummary>& summaries, size_t index) const;
  uint32_t GroupFor(const NodeState& n, const NodeSummary& s);
  uint32_t NewClass(uint64_t hash, uint32_t group, const NodeSummary& s);

  std::vector<Class> classes_;
  std::vector<uint32_t> free_;  // class ids to reuse
  std::unordered_multimap<uint64_t, uint32_t> by_hash_;
  std::vector<Group> groups_;
  std::map<GroupKey, uint32_t> group_ids_;
  std::vector<uint32_t> class_of_;  // by node index
};

}  // namespace gpusched::core
