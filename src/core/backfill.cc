#include "core/backfill.h"

#include <algorithm>

#include "base/units.h"

namespace gpusched::core {

KnownEnd EndOfAttempt(const TaskSpec& s, TimeMs assigned_ms, DurationMs attained_ms,
                      TimeMs now_ms) {
  if (s.time_limit_ms) {
    return {std::max(now_ms, assigned_ms + *s.time_limit_ms), EndBasis::kTimeLimit};
  }
  if (s.duration_ms) {
    const DurationMs left = std::max<DurationMs>(1, *s.duration_ms - attained_ms);
    return {std::max(now_ms, assigned_ms + left), EndBasis::kExpectedDuration};
  }
  return {};
}

int64_t Reservation::gpus() const {
  int64_t n = 0;
  for (const ReservedNode& r : nodes) n += static_cast<int64_t>(r.gpus.size());
  return n;
}

namespace {

// Where and when one rank could start on one node.
struct NodeStart {
  TimeMs at_ms = kUnknownTime;
  ReservedNode node;
  std::vector<std::pair<TaskId, EndBasis>> waits_for;
};

bool Fits(const NodeState& n, const PlacementRequest& shape) {
  // Free memory as accounted: a heartbeat's measure says nothing of the future.
  return FirstRejectingFilter(n, shape, FilterOptions{}) == kNumFilters;
}

void ReleaseOn(NodeState& n, const Placement& at) {
  n.allocated -= at.resources;
  for (size_t k = 0; k < at.gpus.size(); ++k) {
    GpuState& g = n.gpus[static_cast<size_t>(at.gpus[k])];
    g.allocated_mib -= at.gpu_mem_mib[k];
    --g.tasks;
  }
}

// The GPUs `shape` takes on `n` as it is at the start: those it fits, the latest freed first
// (`freed_at` per GPU; the ones free now stay usable meanwhile), then by index.
std::vector<int> PickGpus(const NodeState& n, const PlacementRequest& shape,
                          const std::vector<TimeMs>& freed_at) {
  std::vector<int> fit;
  for (size_t g = 0; g < n.gpus.size(); ++g) {
    if (GpuFits(n.gpus[g], shape, FilterOptions{})) fit.push_back(static_cast<int>(g));
  }
  std::stable_sort(fit.begin(), fit.end(), [&](int a, int b) {
    return freed_at[static_cast<size_t>(a)] > freed_at[static_cast<size_t>(b)];
  });
  fit.resize(std::min(fit.size(), static_cast<size_t>(std::max<int64_t>(0, shape.gpus))));
  std::sort(fit.begin(), fit.end());
  return fit;
}

// One rank on node `index`: its holdings end earliest first (ties by task id) until the
// shape fits. `n` is scratch (assignment reuses its buffers). nullopt: it never fits there.
std::optional<NodeStart> EarliestOnNode(size_t index, const NodeState& node,
                                        const PlacementRequest& shape,
                                        std::vector<Holding>& hs, TimeMs now_ms, NodeState& n) {
  n = node;
  NodeStart s;
  s.node.index = index;
  std::vector<TimeMs> freed_at(n.gpus.size(), std::numeric_limits<TimeMs>::min());
  Resources released;
  if (Fits(n, shape)) {
    s.at_ms = now_ms;
  } else {
    std::sort(hs.begin(), hs.end(), [](const Holding& a, const Holding& b) {
      return a.end.at_ms != b.end.at_ms ? a.end.at_ms < b.end.at_ms : a.task < b.task;
    });
    for (const Holding& h : hs) {
      ReleaseOn(n, *h.at);
      released += h.at->resources;
      for (int g : h.at->gpus) freed_at[static_cast<size_t>(g)] = h.end.at_ms;
      s.waits_for.emplace_back(h.task, h.end.basis);
      if (Fits(n, shape)) {
        s.at_ms = h.end.at_ms;
        break;
      }
    }
    if (!Fits(n, shape)) return std::nullopt;
  }
  s.node.gpus = PickGpus(n, shape, freed_at);
  s.node.withheld.cpu_milli = std::max<int64_t>(0, shape.resources.cpu_milli - released.cpu_milli);
  s.node.withheld.mem_mib = std::max<MiB>(0, shape.resources.mem_mib - released.mem_mib);
  return s;
}

}  // namespace

std::optional<Reservation> PlanEarliestStart(TaskId task, const ClusterState& view,
                                             const PlacementRequest& shape, int64_t ranks,
                                             std::vector<std::vector<Holding>> holdings,
                                             const FilterOptions& fo, TimeMs now_ms) {
  std::vector<NodeStart> starts;
  NodeState scratch;
  for (size_t i = 0; i < view.size(); ++i) {
    // A node that fits now (by the filters' own measure) starts now without a release.
    if (holdings[i].empty() && FirstRejectingFilter(view.node(i), shape, fo) != kNumFilters) {
      continue;
    }
    std::optional<NodeStart> s = EarliestOnNode(i, view.node(i), shape, holdings[i], now_ms,
                                                scratch);
    if (s) starts.push_back(std::move(*s));
  }
  if (ranks < 1 || static_cast<int64_t>(starts.size()) < ranks) return std::nullopt;
  std::sort(starts.begin(), starts.end(), [](const NodeStart& a, const NodeStart& b) {
    return a.at_ms != b.at_ms ? a.at_ms < b.at_ms : a.node.index < b.node.index;
  });
  starts.resize(static_cast<size_t>(ranks));
  Reservation r;
  r.task = task;
  r.start_ms = starts.back().at_ms;
  r.since_ms = now_ms;
  for (NodeStart& s : starts) {
    r.nodes.push_back(std::move(s.node));
    r.waits_for.insert(r.waits_for.end(), s.waits_for.begin(), s.waits_for.end());
  }
  std::sort(r.nodes.begin(), r.nodes.end(),
            [](const ReservedNode& a, const ReservedNode& b) { return a.index < b.index; });
  std::sort(r.waits_for.begin(), r.waits_for.end());
  r.waits_for.erase(std::unique(r.waits_for.begin(), r.waits_for.end()), r.waits_for.end());
  return r;
}

bool MayBackfill(TaskId id, const TaskSpec& s, const Reservation& r, TimeMs now_ms,
                 bool trust_expected) {
  if (id == r.task) return true;
  const std::optional<DurationMs> d =
      s.time_limit_ms ? s.time_limit_ms : (trust_expected ? s.duration_ms : std::nullopt);
  if (!d || !r.start_known()) return false;
  return now_ms + *d <= r.start_ms;
}

void BlockReserved(ClusterState& view, const Reservation& r) {
  for (const ReservedNode& rn : r.nodes) {
    view.Update(rn.index, [&rn](NodeState& n) {
      for (int g : rn.gpus) n.gpus[static_cast<size_t>(g)].healthy = false;
    });
    if (rn.withheld.cpu_milli > 0 || rn.withheld.mem_mib > 0) {
      Placement hold;  // CPU and RAM only, in this copy of the table
      hold.node_index = rn.index;
      hold.node = view.node(rn.index).name;
      hold.resources = rn.withheld;
      view.Reserve(hold);
    }
  }
}

namespace {

// "tasks 3, 5, 7" (at most six ids, then how many more).
std::string TaskList(const std::vector<TaskId>& ids) {
  std::string out = ids.size() == 1 ? "task " : "tasks ";
  for (size_t i = 0; i < ids.size() && i < 6; ++i) out += (i > 0 ? ", " : "") + ids[i].ToString();
  if (ids.size() > 6) out += " and " + std::to_string(ids.size() - 6) + " more";
  return out;
}

// What the start is known from: "time limits of tasks 3, 5; expected duration of task 7".
std::string Basis(const Reservation& r) {
  std::vector<TaskId> limits, expected;
  for (const auto& [id, basis] : r.waits_for) {
    if (basis == EndBasis::kUnknown) {
      return "task " + id.ToString() + " has no time limit or expected duration";
    }
    (basis == EndBasis::kTimeLimit ? limits : expected).push_back(id);
  }
  if (limits.empty() && expected.empty()) return "free now";
  std::string out;
  if (!limits.empty()) out += (limits.size() == 1 ? "time limit of " : "time limits of ") + TaskList(limits);
  if (!expected.empty()) {
    out += (out.empty() ? "" : "; ") +
           std::string(expected.size() == 1 ? "expected duration of " : "expected durations of ") +
           TaskList(expected);
  }
  return out;
}

// "~12s" (whole seconds, rounded up), or "now".
std::string FromNow(TimeMs start_ms, TimeMs now_ms) {
  if (start_ms <= now_ms) return "now";
  return "~" + FormatDurationMs((start_ms - now_ms + 999) / 1000 * 1000);
}

std::string NodeNames(const Reservation& r, const ClusterState& view) {
  std::string out;
  for (const ReservedNode& n : r.nodes) out += (out.empty() ? "" : ", ") + view.node(n.index).name;
  return out;
}

}  // namespace

std::string DescribeReservation(const Reservation& r, const ClusterState& view, TimeMs now_ms) {
  const std::string gpus = std::to_string(r.nodes.empty() ? 0 : r.nodes.front().gpus.size());
  if (r.nodes.size() == 1) {
    const std::string where = "reserved " + gpus + " GPUs on " + NodeNames(r, view);
    if (!r.start_known()) return where + ", start unknown: " + Basis(r);
    return where + " from " + FromNow(r.start_ms, now_ms) + " (" + Basis(r) + ")";
  }
  const std::string head = "reserved " + std::to_string(r.nodes.size()) + " nodes (";
  const std::string what = gpus + " GPUs on each of " + NodeNames(r, view);
  if (!r.start_known()) return head + "start unknown: " + Basis(r) + "): " + what;
  return head + "planned start in " + FormatDurationMs(std::max<TimeMs>(0, r.start_ms - now_ms)) +
         "): " + what + " (" + Basis(r) + ")";
}

std::string DescribeBlocked(const Reservation& r, const TaskSpec& s, const ClusterState& view) {
  std::string out = "; " + std::to_string(r.gpus()) + " GPUs on " +
                    (r.nodes.size() == 1 ? NodeNames(r, view)
                                         : std::to_string(r.nodes.size()) + " nodes") +
                    " are reserved for " + (r.nodes.size() > 1 ? "gang task " : "task ") +
                    r.task.ToString() + (r.start_known() ? "" : " (start unknown)");
  if (!s.time_limit_ms) return out + " and it has no time limit to backfill by";
  return out + " and its time limit would not end before the reservation starts";
}

}  // namespace gpusched::core
