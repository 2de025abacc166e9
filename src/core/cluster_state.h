#pragma once
// CN109992422A's cluster state table: every node with its CPU, RAM and per-GPU memory
// accounting, liveness flags and labels. Reservations are applied at once, so the very next
// decision sees them before any heartbeat (CN109992422A test 6).
//
// Nodes are stored densely (index = registration order) for fast filtering; names are unique.
// Invariant: for every node and GPU, 0 <= allocated <= total (checked on every change).
// Thread-safety: none; const methods may be called concurrently when no thread mutates.

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/check.h"
#include "base/status.h"
#include "core/node.h"
#include "core/node_index.h"
#include "core/task.h"

namespace gpusched::core {

class ClusterState {
 public:
  // Registers a new node or updates the capacity of a known one (an agent that restarted).
  // A capacity update that would fall below what is reserved is an error.
  StatusOr<size_t> Upsert(const NodeSpec& spec, TimeMs now_ms);

  std::optional<size_t> Find(const std::string& name) const;
  // Issue 39 (`node rm`): forgets the node at `index`; every later node's index moves down
  // by one (callers renumber what they hold: Scheduler::RemoveNode). REQUIRES: nothing is
  // reserved on it.
  void Remove(size_t index);
  const NodeState& node(size_t index) const { return nodes_[index]; }
  const NodeSummary& summary(size_t index) const { return summaries_[index]; }
  const std::vector<NodeSummary>& summaries() const { return summaries_; }
  // Applies `fn` to the node's flags or heartbeat data and refreshes its summary.
  // REQUIRES: fn changes neither capacity nor reservations (use Upsert / Reserve / Release).
  template <typename Fn>
  void Update(size_t index, Fn&& fn) {
    fn(nodes_[index]);
    Summarize(index);
  }
  const std::vector<NodeState>& nodes() const { return nodes_; }
  size_t size() const { return nodes_.size(); }
  // |M| of CN115981827A claim 1: the nodes the probe daemon marks reachable (kept current by
  // every summary refresh, so reading it is O(1)).
  size_t reachable_count() const { return reachable_count_; }
  // Issue 43: the nodes by placement state and by how used they are (node_index.h).
  // REQUIRES: the index is kept, and no IndexHold is open (the index may be behind the nodes
  // while one is).
  const NodeIndex& index() const {
    GS_CHECK(keep_index_ && !holding_index_);
    return index_;
  }
  // Whether the node index is kept up to date (on by default; turning it on builds it). A
  // table that only full scans read (the placement option `node_index: false`) leaves it
  // off: a scan does not pay for an index it never reads.
  void KeepIndex(bool keep);
  // Issue 43: while one is open, changes refresh the nodes' summaries at once but move a
  // changed node in the index only when it closes, once however often the node changed (a
  // pass's commit reserves task after task on the same nodes, and nothing places until it
  // ends). Not nested.
  class IndexHold {
   public:
    explicit IndexHold(ClusterState& state);
    ~IndexHold();
    IndexHold(const IndexHold&) = delete;
    IndexHold& operator=(const IndexHold&) = delete;

   private:
    ClusterState& state_;
  };

  // Interned GPU model names; -1 if no node has this model.
  int ModelId(const std::string& model) const;
  const std::string& ModelName(int id) const { return models_[id]; }
  const std::vector<std::string>& models() const { return models_; }

  // Applies / undoes a placement. REQUIRES: the placement fits (Reserve) / was reserved.
  void Reserve(const Placement& p);
  void Release(const Placement& p);

  // Largest values over all nodes, for the "could never fit" admission check.
  struct Extremes {
    int64_t max_gpus = 0;
    MiB max_gpu_mib = 0;
    Resources max_capacity;
  };
  Extremes ComputeExtremes(int model_id) const;

  // Verifies the accounting invariants; returns the first violation.
  Status CheckInvariants() const;

 private:
  int InternModel(const std::string& model);
  void RankNewName(size_t index);
  void SetGpus(NodeState& n, const std::vector<GpuSpec>& specs);
  void Summarize(size_t index);
  Status CheckIndex() const;  // CheckInvariants' part about names and counts

  std::vector<NodeState> nodes_;
  std::vector<NodeSummary> summaries_;
  std::vector<size_t> name_order_;  // node indices in name order
  std::unordered_map<std::string, size_t> by_name_;
  std::vector<std::string> models_;
  std::unordered_map<std::string, int> model_ids_;
  size_t reachable_count_ = 0;
  NodeIndex index_;
  bool keep_index_ = true;
  bool holding_index_ = false;
  std::vector<size_t> held_;  // under an IndexHold: the nodes changed, once per change
};

}  // namespace gpusched::core
