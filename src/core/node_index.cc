#include "core/node_index.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/scorers.h"

namespace gpusched::core {
namespace {

void Mix(uint64_t& h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
}

void MixString(uint64_t& h, const std::string& s) { Mix(h, std::hash<std::string>{}(s)); }

// Everything SameState compares, folded (a name-free fingerprint of the node's state).
uint64_t StateHash(const NodeState& n, const NodeSummary& s) {
  uint64_t h = 0;
  Mix(h, (s.reachable ? 1u : 0u) | (s.available ? 2u : 0u) | (s.unschedulable ? 4u : 0u));
  for (int64_t v : {n.capacity.cpu_milli, n.capacity.mem_mib, n.allocated.cpu_milli,
                    n.allocated.mem_mib, int64_t{n.running_tasks}}) {
    Mix(h, static_cast<uint64_t>(v));
  }
  for (const GpuState& g : n.gpus) {
    for (int64_t v : {int64_t{g.model_id}, g.total_mib, g.allocated_mib, g.reported_free_mib,
                      int64_t{g.tasks}, int64_t{g.healthy}}) {
      Mix(h, static_cast<uint64_t>(v));
    }
  }
  for (const auto& [key, value] : n.labels) {
    MixString(h, key);
    MixString(h, value);
  }
  for (const Taint& t : n.taints) {
    MixString(h, t.key);
    MixString(h, t.value);
    Mix(h, static_cast<uint64_t>(t.effect));
  }
  return h;
}

bool SameGpus(const std::vector<GpuState>& a, const std::vector<GpuState>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const GpuState& x = a[i];
    const GpuState& y = b[i];
    if (x.model_id != y.model_id || x.total_mib != y.total_mib ||
        x.allocated_mib != y.allocated_mib || x.reported_free_mib != y.reported_free_mib ||
        x.tasks != y.tasks || x.healthy != y.healthy) {
      return false;
    }
  }
  return true;
}

// The summary fields but the name rank.
auto SummaryTie(const NodeSummary& s) {
  return std::tie(s.schedulable, s.reachable, s.available, s.unschedulable, s.has_taints,
                  s.has_labels, s.model_id, s.gpu_count, s.unhealthy_gpus, s.whole_free_gpus,
                  s.running_tasks, s.max_gpu_free_mib, s.cpu_free, s.mem_free, s.cpu_alloc,
                  s.mem_alloc, s.gpu_alloc_mib, s.max_gpu_total_mib, s.gpu_total_mib, s.inv_cpu,
                  s.inv_mem, s.inv_gpu_mem);
}

bool EntryBefore(const NodeIndex::Entry& a, const NodeIndex::Entry& b) {
  return a.used != b.used ? a.used < b.used : a.id < b.id;
}

// The entry of class `id` (with that `used`) in the bucket; end() when it is not there.
NodeIndex::Bucket::const_iterator FindEntry(const NodeIndex::Bucket& entries, double used,
                                            uint32_t id) {
  NodeIndex::Entry key;
  key.used = used;
  key.id = id;
  const auto it = std::lower_bound(entries.begin(), entries.end(), key, EntryBefore);
  return it != entries.end() && it->id == id ? it : entries.end();
}

}  // namespace

NodeIndex::Usage NodeIndex::UsageOf(const NodeSummary& s) {
  double f[3];
  Usage u;
  int& k = u.kinds;
  if (s.inv_cpu > 0) f[k++] = static_cast<double>(s.cpu_alloc) * s.inv_cpu;
  if (s.inv_mem > 0) f[k++] = static_cast<double>(s.mem_alloc) * s.inv_mem;
  if (s.inv_gpu_mem > 0) f[k++] = static_cast<double>(s.gpu_alloc_mib) * s.inv_gpu_mem;
  if (k == 0) return u;
  for (int i = 0; i < k; ++i) u.used += f[i];
  u.used /= k;
  u.spread = SpreadOfFractions(f, k);
  if (k == 3) u.angle = Direction(f);
  return u;
}

double NodeIndex::Direction(const double f[3]) {
  // Coordinates on the orthonormal basis (1, -1, 0) / sqrt 2, (1, 1, -2) / sqrt 6 of the plane.
  const double x = (f[0] - f[1]) * (1.0 / std::sqrt(2.0));
  const double y = (f[0] + f[1] - 2.0 * f[2]) * (1.0 / std::sqrt(6.0));
  const double angle = std::atan2(y, x);
  return angle >= M_PI ? -M_PI : angle;
}

double NodeIndex::SectorStart(int sector) { return -M_PI + 2.0 * M_PI * sector / kSectors; }

int NodeIndex::SectorOf(double angle) {
  int sector = static_cast<int>((angle + M_PI) * (kSectors / (2.0 * M_PI)));
  sector = std::clamp(sector, 0, kSectors - 1);
  // Rounding may put an angle at a sector's edge in its neighbour: the start decides.
  while (sector > 0 && angle < SectorStart(sector)) --sector;
  while (sector + 1 < kSectors && angle >= SectorStart(sector + 1)) ++sector;
  return sector;
}

int NodeIndex::SpreadLevel(double spread) {
  return static_cast<int>(std::upper_bound(std::begin(kSpreadEdges), std::end(kSpreadEdges),
                                           spread) -
                          std::begin(kSpreadEdges));
}

std::pair<double, double> NodeIndex::SpreadRange(int level) {
  const double low = level == 0 ? 0.0 : kSpreadEdges[level - 1];
  const double high = level == kSpreads - 1 ? 1.0 : kSpreadEdges[level];
  return {low, high};
}

bool NodeIndex::SameState(const NodeState& a, const NodeSummary& as, const NodeState& b,
                          const NodeSummary& bs) {
  return SummaryTie(as) == SummaryTie(bs) && a.capacity == b.capacity &&
         a.allocated == b.allocated && SameGpus(a.gpus, b.gpus) && a.labels == b.labels &&
         a.taints == b.taints;
}

int NodeIndex::Group::Level(MiB free) const {
  if (key.max_gpu <= 0) return 0;
  return static_cast<int>(std::min<MiB>(free, key.max_gpu + 1) * kLevels / key.max_gpu);
}

uint32_t NodeIndex::GroupFor(const NodeState& n, const NodeSummary& s) {
  GroupKey key{n.capacity.cpu_milli, n.capacity.mem_mib, n.gpu_total_mib, 0, 0,
               static_cast<int32_t>(n.gpus.size())};
  for (size_t g = 0; g < n.gpus.size(); ++g) {
    key.min_gpu = g == 0 ? n.gpus[g].total_mib : std::min(key.min_gpu, n.gpus[g].total_mib);
    key.max_gpu = std::max(key.max_gpu, n.gpus[g].total_mib);
  }
  auto [it, inserted] = group_ids_.emplace(key, static_cast<uint32_t>(groups_.size()));
  if (inserted) groups_.push_back({key, s.inv_cpu, s.inv_mem, s.inv_gpu_mem, {}});
  return it->second;
}

uint32_t NodeIndex::NewClass(uint64_t hash, uint32_t group, const NodeSummary& s) {
  uint32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<uint32_t>(classes_.size());
    classes_.emplace_back();
  }
  Group& g = groups_[group];
  Class& c = classes_[id];
  const Usage usage = UsageOf(s);
  c.hash = hash;
  c.group = group;
  c.used = usage.used;
  c.bucket = Group::BucketOf(s.whole_free_gpus, g.Level(s.max_gpu_free_mib),
                             SpreadLevel(usage.spread), SectorOf(usage.angle));
  by_hash_.emplace(hash, id);
  Bucket& bucket = g.buckets[c.bucket];
  const Entry entry{c.used, id, ScoreInputsOf(s)};
  bucket.insert(std::lower_bound(bucket.begin(), bucket.end(), entry, EntryBefore), entry);
  return id;
}

void NodeIndex::Leave(size_t index, const std::string& name) {
  const uint32_t id = class_of_[index];
  if (id == kNone) return;
  class_of_[index] = kNone;
  Class& c = classes_[id];
  c.members.erase({name, static_cast<uint32_t>(index)});
  if (!c.members.empty()) {
    c.first = c.members.begin()->second;
    return;
  }
  Group& g = groups_[c.group];
  auto bucket = g.buckets.find(c.bucket);
  bucket->second.erase(FindEntry(bucket->second, c.used, id));
  if (bucket->second.empty()) g.buckets.erase(bucket);
  auto [begin, end] = by_hash_.equal_range(c.hash);
  for (auto it = begin; it != end; ++it) {
    if (it->second == id) {
      by_hash_.erase(it);
      break;
    }
  }
  free_.push_back(id);
}

void NodeIndex::Update(const std::vector<NodeState>& nodes,
                       const std::vector<NodeSummary>& summaries, size_t index) {
  if (class_of_.size() < nodes.size()) class_of_.resize(nodes.size(), kNone);
  if (StillInItsClass(nodes, summaries, index)) return;
  Leave(index, nodes[index].name);
  Join(nodes, summaries, index);
}

void NodeIndex::UpdateMany(const std::vector<NodeState>& nodes,
                           const std::vector<NodeSummary>& summaries,
                           const std::vector<size_t>& changed) {
  if (class_of_.size() < nodes.size()) class_of_.resize(nodes.size(), kNone);
  // All leave first: a class's members are compared through its first one, which must be in
  // the class's state when the others join (two members that changed alike would otherwise
  // each find the other and stay, with the class's entry stale).
  for (size_t index : changed) Leave(index, nodes[index].name);
  for (size_t index : changed) Join(nodes, summaries, index);
}

void NodeIndex::Join(const std::vector<NodeState>& nodes,
                     const std::vector<NodeSummary>& summaries, size_t index) {
  const NodeState& n = nodes[index];
  const NodeSummary& s = summaries[index];
  const uint64_t hash = StateHash(n, s);
  uint32_t id = kNone;
  auto [begin, end] = by_hash_.equal_range(hash);
  for (auto it = begin; it != end && id == kNone; ++it) {
    const uint32_t other = classes_[it->second].first;
    if (SameState(n, s, nodes[other], summaries[other])) id = it->second;
  }
  if (id == kNone) id = NewClass(hash, GroupFor(n, s), s);
  Class& c = classes_[id];
  c.members.emplace(n.name, static_cast<uint32_t>(index));
  c.first = c.members.begin()->second;
  class_of_[index] = id;
}

// Most refreshes change nothing placement reads (a heartbeat: its time, the same free
// memory). A member of a class of several that is still in the state of another member
// stays (issue 43: leaving and joining a class of 10,000 members on every heartbeat was a
// twentieth of the server's CPU). A sole member cannot be compared: it joins again.
bool NodeIndex::StillInItsClass(const std::vector<NodeState>& nodes,
                                const std::vector<NodeSummary>& summaries, size_t index) const {
  const uint32_t id = class_of_[index];
  if (id == kNone || classes_[id].members.size() < 2) return false;
  const Class& c = classes_[id];
  const uint32_t other = c.first != index ? c.first : std::next(c.members.begin())->second;
  return SameState(nodes[index], summaries[index], nodes[other], summaries[other]);
}

void NodeIndex::Rebuild(const std::vector<NodeState>& nodes,
                        const std::vector<NodeSummary>& summaries) {
  *this = NodeIndex();
  for (size_t i = 0; i < nodes.size(); ++i) Update(nodes, summaries, i);
}

bool NodeIndex::Consistent(const std::vector<NodeState>& nodes,
                           const std::vector<NodeSummary>& summaries) const {
  if (class_of_.size() != nodes.size()) return false;
  size_t members = 0;
  std::vector<bool> unused(classes_.size(), false);
  for (uint32_t id : free_) unused[id] = true;
  for (uint32_t id = 0; id < classes_.size(); ++id) {
    if (unused[id]) continue;
    const Class& c = classes_[id];
    const auto bucket = groups_[c.group].buckets.find(c.bucket);
    if (c.members.empty() || c.first != c.members.begin()->second ||
        bucket == groups_[c.group].buckets.end()) {
      return false;
    }
    const Bucket& entries = bucket->second;
    const auto entry = FindEntry(entries, c.used, id);
    if (entry == entries.end() ||
        entry->in != ScoreInputsOf(summaries[c.first])) {
      return false;
    }
    const uint32_t first = c.first;
    for (const auto& [name, i] : c.members) {
      if (i >= nodes.size() || nodes[i].name != name || class_of_[i] != id ||
          !SameState(nodes[i], summaries[i], nodes[first], summaries[first])) {
        return false;
      }
    }
    members += c.members.size();
  }
  size_t listed = 0;
  for (const Group& g : groups_) {
    for (const auto& [b, classes] : g.buckets) {
      if (classes.empty() || !std::is_sorted(classes.begin(), classes.end(), EntryBefore)) {
        return false;
      }
      listed += classes.size();
    }
  }
  return members == nodes.size() && listed == class_count();
}

}  // namespace gpusched::core
