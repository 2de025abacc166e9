// ControlPlane: the user-facing API (submit, show, ls, cancel, why, nodes, cordon, drain,
// logs, watch) and the metrics.

#include <algorithm>
#include <iostream>

#include "server/control_plane.h"
#include "spec/profile_flag.h"

namespace gpusched::server {
namespace {

constexpr size_t kDefaultPage = 1000;
constexpr size_t kMaxPage = 10'000;

}  // namespace

TaskView ControlPlane::ViewOf(const core::Task& t) const {
  TaskView v;
  v.task = t;
  if (auto it = last_placement_.find(t.id); it != last_placement_.end()) {
    v.last_placement = it->second;
  }
  if (auto g = last_gang_.find(t.id); g != last_gang_.end()) v.last_gang = g->second;
  v.stored_state = StoredStateIfBehind(t);
  return v;
}

TaskView ControlPlane::ViewOf(store::TaskRecord r) {
  TaskView v;
  v.task = std::move(r.task);
  v.last_placement = std::move(r.last_placement);
  return v;
}

std::optional<core::TaskState> ControlPlane::StoredStateIfBehind(const core::Task& t) const {
  if (!pipeline_.Unstored(t.id)) return std::nullopt;
  auto d = durable_state_.find(t.id);
  if (d == durable_state_.end() || d->second == t.state) return std::nullopt;
  return d->second;
}

StatusOr<TaskId> ControlPlane::Submit(core::TaskSpec spec, const std::string& idempotency_key) {
  std::vector<core::TaskSpec> one;
  one.push_back(std::move(spec));
  GS_ASSIGN_OR_RETURN(std::vector<TaskId> ids, SubmitAll(std::move(one), idempotency_key));
  return ids.front();
}

StatusOr<std::vector<core::TaskSpec>> ControlPlane::ArraySpecs(const core::TaskSpec& spec,
                                                               IndexRange range) {
  // last - first, never count(): {0, INT64_MAX} would overflow it (issue 40).
  if (range.first < 0 || range.last < range.first ||
      range.last - range.first >= core::kMaxArrayTasks) {
    return InvalidArgument("array: " + std::to_string(range.first) + "-" +
                           std::to_string(range.last) +
                           " is not an index range A-B with 0 <= A <= B and at most " +
                           std::to_string(core::kMaxArrayTasks) + " indices");
  }
  std::vector<core::TaskSpec> specs;
  specs.reserve(static_cast<size_t>(range.count()));
  for (int64_t i = range.first; i <= range.last; ++i) {
    core::TaskSpec s = spec;
    const std::string index = std::to_string(i);
    s.env[std::string(core::kArrayIndexEnv)] = index;
    s.name += "[" + index + "]";
    s.array = core::ArrayMember{i, range.first, range.last};  // the server's, never the caller's
    specs.push_back(std::move(s));
  }
  return specs;
}

StatusOr<std::vector<TaskId>> ControlPlane::SubmitArray(core::TaskSpec spec, IndexRange range,
                                                        const std::string& idempotency_key) {
  GS_ASSIGN_OR_RETURN(std::vector<core::TaskSpec> specs, ArraySpecs(spec, range));
  return SubmitAll(std::move(specs), idempotency_key);
}

// The posts' way (AdmitPostedLocked), waited for here: an answer once every task is stored,
// or why not; this thread leads the commits meanwhile.
StatusOr<std::vector<TaskId>> ControlPlane::SubmitAll(std::vector<core::TaskSpec> specs,
                                                      const std::string& idempotency_key) {
  GS_RETURN_IF_ERROR(store_->Health());  // issue 39: no task is acknowledged into a lost file
  GS_RETURN_IF_ERROR(SplitSubmissions::ValidKey(idempotency_key));
  PostedSubmission p{std::move(specs), idempotency_key, std::nullopt, nullptr};
  if (!idempotency_key.empty()) {
    // Outside mu_: a read of the store's key index. A key committed after this read is in
    // recent_keys_ when mu_ is taken below.
    GS_ASSIGN_OR_RETURN(p.stored, SplitSubmissions::ReadStored(*store_, idempotency_key,
                                                               p.specs.size(), &p.partly));
  }
  auto answer = std::make_shared<std::optional<SubmissionWaiters::Result>>();  // under mu_
  p.done = [this, answer](SubmissionWaiters::Result r) {  // called without mu_
    std::lock_guard<std::mutex> lock(mu_);
    *answer = std::move(r);
    commit_cv_.notify_all();
  };
  std::unique_lock<std::mutex> lock(mu_);
  AdmitPostedLocked(p);
  StageChanges();
  for (;;) {
    AnswerSubmissions(lock);  // a refusal decided at admission
    if (answer->has_value()) break;
    if (!pipeline_.committing()) {
      LeadCommit(lock);
    } else {
      commit_cv_.wait(lock);
    }
  }
  SubmissionWaiters::Result result = std::move(**answer);
  lock.unlock();
  if (result.ok()) Kick();
  return result;
}

void ControlPlane::RememberKeyLocked(const std::string& key, TaskId first) {
  pipeline_.pending().keys[key] = first.value();
  recent_keys_.Remember(key, first);
}

// Parts of consecutive tasks, each fitting one commit with the key and its part key.
void ControlPlane::StageSubmissionLocked(const std::vector<TaskId>& ids, const std::string& key) {
  const store::CommitLimits limits = store_->Limits();
  store::CommitCost keys;  // at most the key and a part key
  if (!key.empty()) {
    keys.Put(key.size(), 20, limits);
    keys.Put(SplitSubmissions::PartKey(key, ids.size()).size(), 20, limits);
  }
  std::vector<size_t> parts;  // task counts
  store::CommitCost part = keys;
  size_t count = 0;
  for (TaskId id : ids) {
    const store::CommitCost c = TaskCost(id, limits);
    store::CommitCost with = part;
    with += c;
    if (count > 0 && !with.Within(limits)) {
      parts.push_back(count);
      part = keys;
      count = 0;
    }
    part += c;
    ++count;
  }
  parts.push_back(count);
  if (!key.empty()) RememberKeyLocked(key, ids.front());
  if (parts.size() > 1) splits_.Add(ids.front(), ids.size());
  uint64_t at = ids.front().value();
  for (size_t i = 0; i < parts.size(); ++i) {
    pipeline_.pending().submissions[TaskId(at)] = parts[i];
    if (parts.size() > 1 && !key.empty()) {
      pipeline_.pending().keys[SplitSubmissions::PartKey(key, i + 1)] = at + parts[i] - 1;
    }
    at += parts[i];
  }
}

StatusOr<TaskView> ControlPlane::GetTask(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const core::Task* t = sched_->GetTask(TaskId(id));
    if (t != nullptr && sched_->IsHeld(t->id)) {
      return NotFound("task " + std::to_string(id) + ": no such task");
    }
    if (t != nullptr) return ViewOf(*t);
  }
  // Forgotten after its retention: the store has it, or the archive once history_retention
  // passed (issue 38).
  GS_ASSIGN_OR_RETURN(store::TaskRecord r, StoredOrArchived(id));
  return ViewOf(std::move(r));
}

StatusOr<ListPage> ControlPlane::ListTasks(std::optional<core::TaskState> state,
                                           uint64_t after_id, size_t limit) {
  limit = limit == 0 ? kDefaultPage : std::min(limit, kMaxPage);
  ListPage page;
  if (state && !core::IsTerminal(*state)) {  // every live task is in memory
    std::lock_guard<std::mutex> lock(mu_);
    const std::set<uint64_t>& ids = index_.InState(*state);
    for (auto it = ids.upper_bound(after_id); it != ids.end(); ++it) {
      const core::Task* t = sched_->GetTask(TaskId(*it));
      if (t == nullptr || sched_->IsHeld(t->id)) continue;
      if (page.tasks.size() == limit) {
        page.next_after_id = page.tasks.back().id();
        break;
      }
      page.tasks.push_back(ViewOf(*t));
    }
    return page;
  }
  std::optional<std::string> name;
  if (state) name = core::TaskStateName(*state);
  GS_ASSIGN_OR_RETURN(store::TaskPage stored, store_->ListTasks(name, after_id, limit));
  std::lock_guard<std::mutex> lock(mu_);
  std::map<uint64_t, TaskView> out;
  for (store::TaskRecord& r : stored.tasks) {
    const core::Task* t = sched_->GetTask(r.task.id);
    if (t != nullptr) {  // memory is fresher than the store (by one commit at most)
      if (!state || t->state == *state) out[t->id.value()] = ViewOf(*t);
      continue;
    }
    const uint64_t id = r.task.id.value();
    out[id] = ViewOf(std::move(r));
  }
  if (state) {  // finished in memory, record still being written
    const uint64_t end = stored.next_after_id == 0 ? UINT64_MAX : stored.next_after_id;
    const std::set<uint64_t>& ids = index_.InState(*state);
    for (auto it = ids.upper_bound(after_id); it != ids.end() && *it <= end; ++it) {
      if (out.count(*it) == 0) out[*it] = ViewOf(*sched_->GetTask(TaskId(*it)));
    }
  }
  page.next_after_id = stored.next_after_id;
  for (auto& [id, p] : out) {
    if (page.tasks.size() == limit) {
      page.next_after_id = page.tasks.back().id();
      break;
    }
    page.tasks.push_back(std::move(p));
  }
  return page;
}

StatusOr<ListPage> ControlPlane::ListTasksIn(const std::set<core::TaskState>& states,
                                             uint64_t after_id, size_t limit) {
  if (states.empty()) return ListTasks(std::nullopt, after_id, limit);
  if (states.size() == 1) return ListTasks(*states.begin(), after_id, limit);
  limit = limit == 0 ? kDefaultPage : std::min(limit, kMaxPage);
  const bool live = std::none_of(states.begin(), states.end(), core::IsTerminal);
  ListPage page;
  if (live) {
    std::lock_guard<std::mutex> lock(mu_);
    // The first limit + 1 ids of each state hold the first limit + 1 of their union.
    std::set<uint64_t> ids;
    for (core::TaskState st : states) {
      const std::set<uint64_t>& of = index_.InState(st);
      size_t taken = 0;
      for (auto it = of.upper_bound(after_id); it != of.end() && taken <= limit; ++it) {
        const core::Task* t = sched_->GetTask(TaskId(*it));
        if (t == nullptr || sched_->IsHeld(t->id)) continue;
        ids.insert(*it);
        ++taken;
      }
    }
    for (uint64_t id : ids) {
      if (page.tasks.size() == limit) {
        page.next_after_id = page.tasks.back().id();
        break;
      }
      page.tasks.push_back(ViewOf(*sched_->GetTask(TaskId(id))));
    }
    return page;
  }
  // A finished state: the store's pages of every task, each task in its latest state (memory
  // before the store), filtered. Bounded per call; the caller goes on from next_after_id.
  constexpr int kMaxScanPages = 64;
  uint64_t cursor = after_id;
  for (int pages = 0; pages < kMaxScanPages; ++pages) {
    GS_ASSIGN_OR_RETURN(ListPage all, ListTasks(std::nullopt, cursor, limit));
    for (TaskView& t : all.tasks) {
      cursor = t.id();
      if (states.count(t.shown_state()) == 0) continue;
      page.tasks.push_back(std::move(t));
      if (page.tasks.size() == limit) {
        page.next_after_id = cursor;
        return page;
      }
    }
    if (all.next_after_id == 0) return page;
    cursor = all.next_after_id;
  }
  page.next_after_id = cursor;
  return page;
}

std::vector<TaskView> ControlPlane::RecentTasks() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TaskView> out;
  for (const core::Task* t : sched_->Tasks()) {
    if (!sched_->IsHeld(t->id)) out.push_back(ViewOf(*t));
  }
  return out;
}

StatusOr<TaskView> ControlPlane::Cancel(uint64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  const core::Task* t = sched_->GetTask(TaskId(id));
  if (t == nullptr) {
    lock.unlock();
    GS_ASSIGN_OR_RETURN(store::TaskRecord r, StoredOrArchived(id));  // NotFound when absent
    return FailedPrecondition(core::AlreadyEndedMessage(id, r.task.state));
  }
  // Issue 40: a cancellation is acknowledged only once stored. One refused as not stored is
  // cancelled again by driving its commit, not answered "already cancelled".
  const bool unstored_cancel =
      t->state == core::TaskState::kCancelled && StoredStateIfBehind(*t).has_value();
  if (!unstored_cancel) GS_RETURN_IF_ERROR(sched_->Cancel(TaskId(id)));
  const uint64_t seq = StageChanges();
  Status s = CommitThrough(lock, seq);
  if (!s.ok()) {
    return NotStored("task " + std::to_string(id) + ": the cancellation is not stored (" +
                     s.message() + "): a restart of the server before it is would forget it "
                     "and the task would run on; run cancel again (the server retries the "
                     "write meanwhile, and the kill waits for it)");
  }
  // The commit was waited for with mu_ released: retention may have dropped the task since
  // (retain_finished: 0); the store has it.
  if (const core::Task* now = sched_->GetTask(TaskId(id))) return ViewOf(*now);
  lock.unlock();
  GS_ASSIGN_OR_RETURN(store::TaskRecord r, store_->GetTask(id));
  return ViewOf(std::move(r));
}

StatusOr<core::Explanation> ControlPlane::Why(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sched_->IsHeld(TaskId(id))) return NotFound("task " + std::to_string(id) + ": no such task");
  return sched_->Explain(TaskId(id));
}

StatusOr<NodeView> ControlPlane::NodeViewOf(const std::string& node) const {
  auto index = sched_->cluster().Find(node);
  if (!index) return NotFound("node " + node + ": no such node");
  NodeView v;
  v.node = sched_->cluster().node(*index);
  for (const core::GpuState& g : v.node.gpus) {
    v.gpu_models.push_back(sched_->cluster().ModelName(g.model_id));
  }
  v.connected = agents_.Connected(node);
  return v;
}

std::string ControlPlane::EvictionHold() {
  std::lock_guard<std::mutex> lock(mu_);
  return sched_->eviction_hold();
}

std::vector<NodeView> ControlPlane::ListNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, NodeView> sorted;
  for (const core::NodeState& n : sched_->cluster().nodes()) sorted[n.name] = *NodeViewOf(n.name);
  std::vector<NodeView> out;
  for (auto& [name, n] : sorted) out.push_back(std::move(n));
  return out;
}

GpuTotals ControlPlane::GpuTotalMib() {
  GpuTotals totals;
  for (const NodeView& n : ListNodes()) {
    for (const core::GpuState& g : n.node.gpus) totals[{n.node.name, g.index}] = g.total_mib;
  }
  return totals;
}

void ControlPlane::QueueNode(const std::string& node) {
  auto index = sched_->cluster().Find(node);
  if (!index) return;
  const core::NodeState& n = sched_->cluster().node(*index);
  store::NodeRecord r;
  r.spec.name = n.name;
  r.spec.address = n.address;
  r.spec.capacity = n.capacity;
  for (const core::GpuState& g : n.gpus) {
    r.spec.gpus.push_back({sched_->cluster().ModelName(g.model_id), g.total_mib});
  }
  r.spec.labels = n.labels;
  r.spec.taints = n.taints;
  r.cordoned = n.cordoned;
  r.draining = n.draining;
  pipeline_.pending().nodes[node] = std::move(r);
  pipeline_.pending().removed_nodes.erase(node);  // registered again after a `node rm`
}

StatusOr<NodeView> ControlPlane::ChangeNode(const std::string& node,
                                            const std::function<Status()>& change) {
  std::unique_lock<std::mutex> lock(mu_);
  GS_RETURN_IF_ERROR(change());
  QueueNode(node);
  GS_RETURN_IF_ERROR(CommitThrough(lock, StageChanges()));  // the flag, and any kills it caused
  StatusOr<NodeView> out = NodeViewOf(node);
  lock.unlock();
  Kick();
  return out;
}

StatusOr<NodeView> ControlPlane::Cordon(const std::string& node, bool cordon) {
  return ChangeNode(node, [&] { return sched_->Cordon(node, cordon); });
}

StatusOr<NodeView> ControlPlane::Drain(const std::string& node, bool evict) {
  return ChangeNode(node, [&] { return sched_->Drain(node, evict); });
}

StatusOr<ControlPlane::LogSource> ControlPlane::LogSourceOf(uint64_t id, int rank,
                                                          int64_t attempt) {
  std::optional<core::Placement> last;
  std::map<int64_t, std::string> attempt_nodes;  // issue 41: `logs --attempt N`
  std::vector<std::string> gang;  // the last attempt's nodes in rank order (gangs only)
  int64_t nodes = 1, per_node = 1;  // ranks = nodes x processes per node
  LogSource src;
  bool in_memory = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const core::Task* t = sched_->GetTask(TaskId(id));
    in_memory = t != nullptr && !sched_->IsHeld(t->id);
    if (in_memory) {
      src.done = core::IsTerminal(t->state);
      src.attempt = t->attempts;
      nodes = t->spec.nodes;
      per_node = t->spec.tasks_per_node;
      attempt_nodes = t->attempt_nodes;
      if (auto it = last_placement_.find(t->id); it != last_placement_.end()) last = it->second;
      if (auto it = last_gang_.find(t->id); it != last_gang_.end()) gang = it->second;
    }
  }
  if (!in_memory) {  // forgotten after its retention (or unknown: NotFound)
    StatusOr<store::TaskRecord> r = StoredOrArchived(id);
    if (!r.ok()) return r.status();
    src.done = core::IsTerminal(r->task.state);
    src.attempt = r->task.attempts;
    nodes = r->task.spec.nodes;
    per_node = r->task.spec.tasks_per_node;
    attempt_nodes = r->task.attempt_nodes;
    last = r->last_placement;
  }
  if (rank < 0 || rank >= nodes * per_node) {
    return InvalidArgument("rank: " + std::to_string(rank) + " (task " + std::to_string(id) +
                           " has ranks 0-" + std::to_string(nodes * per_node - 1) + ")");
  }
  if (attempt > 0 && attempt != src.attempt) {
    GS_ASSIGN_OR_RETURN(std::string node, EarlierAttemptNode(id, rank / per_node, attempt,
                                                             src.attempt, attempt_nodes));
    src.attempt = attempt;
    src.done = true;  // that attempt is over: no more output comes
    return WithAgentOf(std::move(node), std::move(src));
  }
  if (!last) return src;  // never ran: no log yet
  std::string node = last->node;
  // The processes of one node share its log (--tasks-per-node K: rank r runs on node r / K).
  rank = static_cast<int>(rank / per_node);
  if (rank > 0) {
    if (static_cast<size_t>(rank) >= gang.size()) {
      return NotFound("rank " + std::to_string(rank) + " of task " + std::to_string(id) +
                      ": its node is no longer known to this server (rank 0's log is on " +
                      node + ")");
    }
    node = gang[static_cast<size_t>(rank)];
  }
  return WithAgentOf(std::move(node), std::move(src));
}

StatusOr<std::string> ControlPlane::EarlierAttemptNode(
    uint64_t id, int node_rank, int64_t attempt, int64_t latest,
    const std::map<int64_t, std::string>& attempt_nodes) {
  const std::string task = "task " + std::to_string(id);
  if (attempt > latest) {
    return InvalidArgument("attempt: " + std::to_string(attempt) + " (" + task + " has run " +
                           std::to_string(latest) + (latest == 1 ? " attempt)" : " attempts)"));
  }
  if (node_rank > 0) {
    return InvalidArgument("rank: an earlier attempt's log is kept for rank 0 only (" + task +
                           ", attempt " + std::to_string(attempt) + ")");
  }
  auto it = attempt_nodes.find(attempt);
  if (it == attempt_nodes.end()) {
    return NotFound("attempt " + std::to_string(attempt) + " of " + task +
                    ": its node is not recorded (the latest " + std::to_string(core::kMaxHistory) +
                    " attempts' are)");
  }
  return it->second;
}

ControlPlane::LogSource ControlPlane::WithAgentOf(std::string node, LogSource src) {
  std::lock_guard<std::mutex> lock(mu_);
  auto index = sched_->cluster().Find(node);
  if (index) src.address = sched_->cluster().node(*index).address;
  src.node = node;
  if (std::shared_ptr<AgentChannel> conn = agents_.Channel(node)) {
    src.log_read_key = conn->LogReadKey();
  }
  return src;
}

uint64_t ControlPlane::WaitForChanges(uint64_t since, DurationMs timeout_ms,
                                      std::vector<uint64_t>& ids, bool& everything) {
  std::unique_lock<std::mutex> lock(mu_);
  clock_.WaitFor(lock, changes_cv_, timeout_ms, [&] { return changes_.version() > since; });
  ids = changes_.Since(since, everything);
  return changes_.version();
}

// ---------------------------------------------------------------- probe daemon

std::vector<ControlPlane::ProbeTarget> ControlPlane::ProbeTargets(bool first_only) {
  std::lock_guard<std::mutex> lock(mu_);
  return agents_.ProbeTargets(sched_->cluster().nodes(), first_only);
}

void ControlPlane::SetProbeResult(const std::string& node, bool reachable) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    agents_.SetProbeResult(node, reachable);
    UpdateReachable(node);
    StageChanges();
  }
  Kick();
}

void ControlPlane::AttachProber(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& node : agents_.AttachProber(std::move(wake))) UpdateReachable(node);
}

// ---------------------------------------------------------------- metrics

// admin only
StatusOr<core::TeamQuota> ControlPlane::SetQuota(core::TeamQuota quota, bool keep_guarantee) {
  std::unique_lock<std::mutex> lock(mu_);
  const core::TeamQuota current = sched_->quotas().Of(quota.team);
  if (keep_guarantee) {
    quota.guaranteed_gpus = current.guaranteed_gpus;
    quota.guaranteed_gpu_mem_mib = current.guaranteed_gpu_mem_mib;
    quota.borrow_gpus = current.borrow_gpus;
  }
  if (quota.max_priority.empty()) quota.max_priority = current.max_priority;
  if (quota.max_priority == "none") quota.max_priority.clear();
  GS_RETURN_IF_ERROR(sched_->SetQuota(quota));  // validates
  pipeline_.pending().quotas[quota.team] = quota;
  GS_RETURN_IF_ERROR(CommitThrough(lock, StageChanges()));
  lock.unlock();
  Kick();  // a pass under the new quota
  return quota;
}

Status ControlPlane::RemoveQuota(const std::string& team) {
  std::unique_lock<std::mutex> lock(mu_);
  if (sched_->quotas().quotas().count(team) == 0) {
    return NotFound("team: \"" + team + "\" has no quota (gpusched quota ls lists the teams)");
  }
  sched_->RemoveQuota(team);
  pipeline_.pending().quotas[team] = std::nullopt;
  GS_RETURN_IF_ERROR(CommitThrough(lock, StageChanges()));
  lock.unlock();
  Kick();  // a pass without the quota
  return Status::Ok();
}

// admin only
std::vector<TeamQuotaView> ControlPlane::ListQuotas() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TeamQuotaView> out;
  const bool enforced = sched_->config().priority_grants.enforce;
  for (auto& [team, s] : sched_->Teams()) {
    TeamQuotaView v{team, std::move(s), std::nullopt};
    if (enforced) v.granted_priority = sched_->GrantedClass(team);
    out.push_back(std::move(v));
  }
  return out;
}

namespace {

LearnedProfileView LearnedProfileOf(const core::MemoryProfile& p, const core::LearnedPeaks& l,
                                    const core::GpuMemoryTable& table) {
  LearnedProfileView v{spec::FormatProfileFlag(p), p, l, std::nullopt};
  if (auto est = table.Estimate(p); est.ok()) v.estimate_mib = est->mib;
  return v;
}

}  // namespace

std::vector<LearnedProfileView> ControlPlane::ListLearnedProfiles() {
  std::lock_guard<std::mutex> lock(mu_);
  const core::GpuMemoryTable& table = sched_->memory_table();
  std::vector<LearnedProfileView> out;
  for (const auto& [p, l] : table.learned()) out.push_back(LearnedProfileOf(p, l, table));
  std::sort(out.begin(), out.end(),
            [](const LearnedProfileView& a, const LearnedProfileView& b) { return a.key < b.key; });
  return out;
}

// Without mu_: the store serialises the snapshot against its commits, and a task is
// acknowledged only after its commit returned.
Status ControlPlane::Backup(const std::string& path) { return store_->SnapshotTo(path); }

StatusOr<LearnedProfileView> ControlPlane::RemoveLearnedProfile(const std::string& key) {
  std::unique_lock<std::mutex> lock(mu_);
  core::GpuMemoryTable& table = sched_->memory_table();
  std::optional<core::MemoryProfile> found;
  for (const auto& [p, l] : table.learned()) {
    if (spec::FormatProfileFlag(p) == key) found = p;
  }
  if (!found) {
    auto parsed = spec::ParseProfileFlag(key, "profile");
    if (parsed.ok() && table.learned().count(*parsed) > 0) found = *parsed;
  }
  if (!found) {
    return NotFound("profile \"" + key + "\": nothing learned for it (see `gpusched profile ls`)");
  }
  LearnedProfileView removed = LearnedProfileOf(*found, table.learned().at(*found), table);
  table.Forget(*found);
  pipeline_.pending().peaks.insert(*found);  // stored as forgotten
  GS_RETURN_IF_ERROR(CommitThrough(lock, StageChanges()));
  if (auto est = table.Estimate(*found); est.ok()) removed.estimate_mib = est->mib;
  return removed;
}

std::string ControlPlane::MetricsText(bool with_teams) {
  std::lock_guard<std::mutex> lock(mu_);
  const ServerMetrics::Sources sources{*sched_, index_,
                                       filter_pool_ ? filter_pool_->concurrency() : 1,
                                       store_->Health().ok()};
  return metrics_.Render(sources, with_teams);
}

}  // namespace gpusched::server
