// ControlPlane: creation and restore, the loop, and the commit pipeline (persist before act,
// group commit, retries, held messages, retention). The API is in control_plane_api.cc, the
// agent events in control_plane_agents.cc.

#include "server/control_plane.h"

#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "base/log.h"
#include "base/thread_name.h"
#include "base/units.h"
#include "spec/spec_yaml.h"
#include "store/record_codec.h"

namespace gpusched::server {
namespace {

// A gang's MASTER_PORT: torchrun's default port plus the task id modulo the range.
constexpr uint64_t kGangPortBase = 29500;
constexpr uint64_t kGangPorts = 1000;

constexpr size_t kPtInPrint = 3;
std::array<int64_t, 6> Fingerprint(const core::Task& t) {
  return {static_cast<int64_t>(t.state), t.attempts, t.fail_cnt, t.pt,
          static_cast<int64_t>(t.history.size()), static_cast<int64_t>(t.ranks_done.size())};
}

// Whether two prints of a task differ in its Pt alone (a flush's demotion).
bool OnlyPtChanged(std::array<int64_t, 6> was, const std::array<int64_t, 6>& now) {
  was[kPtInPrint] = now[kPtInPrint];
  return was == now;
}

// What torchrun and DeepSpeed read, for node rank `a.rank` of a gang (or the one node of a
// task with --tasks-per-node): the world, this process's place in it, and where rank 0
// listens. With K processes per node the agent's launcher (agent/rank_launcher.h) gives each
// its LOCAL_RANK and RANK from these. MASTER_ADDR is the host of rank 0's agent address (its
// node name when that is unknown or a wildcard); the port is fixed per task, so every rank
// computes the same one without a round trip.
std::map<std::string, std::string> GangEnvironment(const core::Task& t, const core::Action& a,
                                                   const core::ClusterState& cluster) {
  const std::vector<std::string> gang =
      a.gang_nodes.empty() ? std::vector<std::string>{a.node} : a.gang_nodes;
  std::string master = gang.front();
  if (auto index = cluster.Find(master)) {
    const std::string& address = cluster.node(*index).address;
    const size_t colon = address.rfind(':');
    std::string host = colon == std::string::npos ? address : address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);  // [::1]
    }
    // A wildcard listen address says nothing of where the node is: its name, then.
    if (!host.empty() && host != "0.0.0.0" && host != "::") master = host;
  }
  const int64_t per_node = t.spec.tasks_per_node;
  const int64_t nnodes = static_cast<int64_t>(gang.size());
  std::string nodes;
  for (const std::string& n : gang) nodes += (nodes.empty() ? "" : ",") + n;
  std::map<std::string, std::string> env = {
      {"WORLD_SIZE", std::to_string(nnodes * per_node)},
      {"RANK", std::to_string(a.rank * per_node)},
      {"LOCAL_RANK", "0"},
      {"LOCAL_WORLD_SIZE", std::to_string(per_node)},
      {"NODE_RANK", std::to_string(a.rank)},
      {"NNODES", std::to_string(nnodes)},
      {"MASTER_ADDR", master},
      {"MASTER_PORT", std::to_string(kGangPortBase + t.id.value() % kGangPorts)},
      {"GPUSCHED_GANG_NODES", nodes}};
  if (per_node > 1) env["GPUSCHED_TASKS_PER_NODE"] = std::to_string(per_node);
  return env;
}

// CN109992422A claim 1: the table of the config (a file, then an inline table). The learned
// peaks are added by Restore, from the store.
Status LoadMemoryTable(const ServerConfig& config, core::GpuMemoryTable& table) {
  if (!config.memory_table.empty()) {
    std::ifstream in(config.memory_table);
    if (!in) return InvalidArgument("memory_table: cannot read " + config.memory_table);
    std::stringstream text;
    text << in.rdbuf();
    GS_RETURN_IF_ERROR(spec::LoadMemoryTableYaml(text.str(), config.memory_table, &table));
  }
  if (!config.memory_table_yaml.empty()) {
    GS_RETURN_IF_ERROR(
        spec::LoadMemoryTableYaml(config.memory_table_yaml, "config memory_table", &table));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<ControlPlane>> ControlPlane::Create(
    const ServerConfig& config, Clock& clock, std::unique_ptr<store::StateStore> store) {
  GS_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<ThreadPool> pool;
  if (config.FilterWorkers() > 1) pool = std::make_unique<ThreadPool>(config.FilterWorkers());
  // Issue 36: priority classes are granted per team once callers are known; a single-user
  // server without authentication keeps every class allowed.
  core::SchedulerConfig sc = config.scheduler;
  sc.priority_grants.enforce = config.AuthEnabled();
  GS_ASSIGN_OR_RETURN(std::unique_ptr<core::Scheduler> sched,
                      core::Scheduler::Create(sc, clock, pool.get()));
  GS_RETURN_IF_ERROR(LoadMemoryTable(config, sched->memory_table()));
  std::unique_ptr<ControlPlane> cp(
      new ControlPlane(config, clock, std::move(store), std::move(pool), std::move(sched)));
  if (!config.config_file.empty()) {  // issue 39: the baseline of `admin reload`
    GS_ASSIGN_OR_RETURN(ConfigReloader reloader, ConfigReloader::Open(config.config_file, config));
    cp->reloader_ = std::make_unique<ConfigReloader>(std::move(reloader));
  }
  GS_RETURN_IF_ERROR(cp->Restore());
  return cp;
}

ControlPlane::ControlPlane(const ServerConfig& config, Clock& clock,
                           std::unique_ptr<store::StateStore> store,
                           std::unique_ptr<ThreadPool> filter_pool,
                           std::unique_ptr<core::Scheduler> scheduler)
    : config_(config),
      clock_(clock),
      store_(std::move(store)),
      filter_pool_(std::move(filter_pool)),
      sched_(std::move(scheduler)) {}

ControlPlane::~ControlPlane() { StopLoop(); }

// Fair share's memory of usage, from every stored task: the GPUs of its last placement for
// its last run (assignment to finish; a live task's run up to now, from where the scheduler
// charges it on), as of when that run ended. Earlier attempts of a retried task are not in its
// record and are not counted. O(stored tasks), once per start or take-over, like the
// accounting views; records older than 20 half-lives are skipped (under a millionth is left).
Status ControlPlane::RestoreFairShareUsage() {
  const TimeMs now = clock_.NowMs();
  const DurationMs half_life = sched_->config().fair_share.half_life_ms;
  for (uint64_t after = 0;;) {
    GS_ASSIGN_OR_RETURN(store::TaskPage page, store_->ListTasks(std::nullopt, after, 1000));
    for (const store::TaskRecord& r : page.tasks) {
      const core::Task& t = r.task;
      const std::optional<core::Placement>& p = t.placement ? t.placement : r.last_placement;
      if (!p || t.assigned_ms <= 0) continue;
      const bool live = !core::IsTerminal(t.state);
      if (live && core::IsPending(t.state)) continue;  // not holding GPUs now
      const TimeMs end = live ? now : t.finished_ms;
      if (end <= t.assigned_ms) continue;
      if (half_life > 0 && now - end > 20 * half_life) continue;
      sched_->RestoreUsage(t.spec, static_cast<int64_t>(p->gpus.size()), end - t.assigned_ms,
                           end);
    }
    if (page.next_after_id == 0) break;
    after = page.next_after_id;
  }
  return Status::Ok();
}

double ControlPlane::FairShareOf(const std::string& team, const std::string& user) {
  std::lock_guard<std::mutex> lock(mu_);
  return sched_->FairShareOf(team, user);
}

Status ControlPlane::Restore() {
  std::unique_lock<std::mutex> lock(mu_);
  const TimeMs started_mono = clock_.MonoMs();
  GS_ASSIGN_OR_RETURN(std::set<std::string> nodes, RestoreNodes());
  const size_t node_count = nodes.size();
  GS_ASSIGN_OR_RETURN(store::LiveTasks live, store_->LoadLiveTasks());
  RestoreTasks(live);
  if (sched_->config().fair_share.enabled()) GS_RETURN_IF_ERROR(RestoreFairShareUsage());
  GS_ASSIGN_OR_RETURN(const size_t peaks, RestoreTablesAndCounts());
  const DurationMs took = clock_.MonoMs() - started_mono;
  // Issue 43: the reload is this server's silence, not the nodes' (a million tasks take
  // about a minute, past node_timeout): every node and running task is heard from as of now,
  // and passes wait for the agents from now (a live one retries within a second), for two
  // heartbeat periods at most: the first to come back does not send to FQ, for t2, the
  // tasks the others would take.
  sched_->ForgiveSilence(took);
  sched_->AwaitNodes(std::move(nodes), sched_->NowMs() + 2 * config_.node_heartbeat_ms);
  if (live.max_id > 0) {
    logging::Info("server", "restored " + std::to_string(live.tasks.size()) +
                                " live tasks (ids up to " + std::to_string(live.max_id) + "), " +
                                std::to_string(node_count) + " nodes, " + std::to_string(peaks) +
                                " learned memory peaks in " + std::to_string(took) + " ms");
  }
  // Tasks requeued by the restore are written back before anything acts on them.
  const uint64_t seq = StageChanges();
  return CommitThrough(lock, seq);
}

StatusOr<std::set<std::string>> ControlPlane::RestoreNodes() {
  GS_ASSIGN_OR_RETURN(std::vector<store::NodeRecord> nodes, store_->LoadNodes());
  std::set<std::string> known;
  for (const store::NodeRecord& n : nodes) {
    GS_RETURN_IF_ERROR(sched_->RegisterNode(n.spec));
    // Unreachable until the agent reconnects: no new work goes there meanwhile.
    GS_RETURN_IF_ERROR(sched_->SetNodeReachable(n.spec.name, false));
    if (n.cordoned) GS_RETURN_IF_ERROR(sched_->Cordon(n.spec.name, true));
    known.insert(n.spec.name);
  }
  return known;
}

void ControlPlane::RestoreTasks(const store::LiveTasks& live) {
  for (const store::QuarantinedRow& q : live.quarantined) {
    logging::Error("server", "QUARANTINED " + q.table + " row " + q.key + ": " + q.error +
                               " (moved to the quarantine table; the server serves every other "
                               "task)");
  }
  metrics_.SetQuarantined(static_cast<int64_t>(live.quarantined.size()));
  for (const store::TaskRecord& r : live.tasks) {
    Status s = sched_->Restore(r.task);
    if (!s.ok()) {
      logging::Error("server", "not restored: " + s.ToString(), logging::TaskF(r.task.id.value()));
      continue;
    }
    if (r.last_placement) last_placement_[r.task.id] = *r.last_placement;
    const core::Task& t = *sched_->GetTask(r.task.id);
    persisted_[t.id] = Fingerprint(r.task);
    durable_state_[t.id] = r.task.state;
    index_.Put(t.id.value(), t.state, clock_.MonoMs());
  }
  sched_->ReserveIdsBelow(live.max_id + 1);  // ids of finished or quarantined tasks stay used
}

StatusOr<size_t> ControlPlane::RestoreTablesAndCounts() {
  GS_ASSIGN_OR_RETURN(std::vector<store::LearnedPeak> peaks, store_->LoadLearnedPeaks());
  for (const store::LearnedPeak& p : peaks) {
    sched_->memory_table().RestoreLearned(p.profile, p.recent_mib, p.observations);
  }
  GS_ASSIGN_OR_RETURN(std::vector<store::TokenRecord> tokens, store_->LoadTokens());
  for (store::TokenRecord& t : tokens) tokens_.Put(std::move(t));
  GS_ASSIGN_OR_RETURN(std::vector<core::TeamQuota> quotas, store_->LoadQuotas());
  for (const core::TeamQuota& q : quotas) {
    Status s = sched_->SetQuota(q);
    if (!s.ok()) logging::Warn("server", "quota of team " + q.team + " ignored: " + s.ToString());
  }
  GS_ASSIGN_OR_RETURN(auto counts, store_->CountTasksByState());
  for (core::TaskState s : {core::TaskState::kSucceeded, core::TaskState::kFailed,
                            core::TaskState::kCancelled}) {  // not restored into memory
    if (auto it = counts.find(core::TaskStateName(s)); it != counts.end()) {
      index_.AddLeftFinished(it->first, it->second);
    }
  }
  return peaks.size();
}

// ---------------------------------------------------------------- loop

void ControlPlane::StartLoop() {
  loop_ = std::thread([this] {
    NameThisThread("gs-sched-loop");
    LoopMain();
  });
  archiver_ = std::thread([this] {
    NameThisThread("gs-archiver");
    ArchiverMain();
  });
}

void ControlPlane::StopLoop() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    stop_ = true;
  }
  loop_cv_.notify_all();
  archive_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  if (archiver_.joinable()) archiver_.join();
  AbandonSubmissions();  // no round will take what is posted now
}

void ControlPlane::AbandonSubmissions() {
  auto [registrations, posted] = inbox_.Close();
  std::unique_lock<std::mutex> lock(mu_);
  for (PostedRegistration& r : registrations) {
    r.done(Unavailable("the server stopped before registering the agent: connect again"));
  }
  for (PostedSubmission& p : posted) {
    waiters_.Decide(std::move(p.done),
                    NotStored("task not stored (the server stopped before admitting it); "
                              "nothing was queued: submit again"));
  }
  // A commit in flight may carry some: they are answered by its end, the rest withdrawn here
  // so that no later commit (another caller's) stores a task its submitter was told is not.
  commit_cv_.wait(lock, [&] { return !pipeline_.committing(); });
  for (const SplitSubmissions::Split& split : splits_.TakeAll()) {  // issue 38
    if (split.stored == 0) continue;  // answered below with the others
    PendingWrite& staged = pipeline_.pending();
    WithdrawSplitRest(split, staged);
    (void)waiters_.Failed(split.first, SplitSubmissions::Partly(split.first, split.count,
                                                                split.stored,
                                                                "the server stopped"));
  }
  for (TaskId id : waiters_.AbandonAll(NotStored("task not stored (the server stopped before "
                                                 "its commit); nothing was queued: submit again"))) {
    Forget(id);
  }
  AnswerSubmissions(lock);
}

void ControlPlane::AnswerSubmissions(std::unique_lock<std::mutex>& lock) {
  if (!waiters_.has_answers()) return;
  std::vector<SubmissionWaiters::Answer> ready = waiters_.TakeAnswers();
  lock.unlock();
  for (auto& [done, result] : ready) done(std::move(result));
  lock.lock();
}

void ControlPlane::Kick() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    kicked_ = true;
  }
  loop_cv_.notify_one();
}

// Issue 37: a round that starts more than a tick plus a node heartbeat period after the last
// one found the server paused (SIGSTOP, a stall): the heartbeats of that time may still wait
// in its sockets, and no node is judged for a silence the server did not listen to.
void ControlPlane::LoopMain() {
  const DurationMs tick = std::min(config_.loop_tick_ms, config_.scheduler.t1_ms);
  loop_watches_pauses_ = true;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(loop_mu_);
      clock_.WaitFor(lock, loop_cv_, tick, [&] { return kicked_ || stop_; });
      if (stop_) return;
      kicked_ = false;
    }
    RunOnce();
  }
}

// The check is right before Tick, not at the loop's wake-up: a pause that hits while the round
// reads keys from the store or waits for mu_ would otherwise pass unseen.
void ControlPlane::ForgivePauseBeforeTickLocked() {
  if (!loop_watches_pauses_) return;
  const DurationMs tick = std::min(config_.loop_tick_ms, config_.scheduler.t1_ms);
  const TimeMs now = clock_.MonoMs();
  if (last_tick_mono_ > 0 && now - last_tick_mono_ > tick + config_.node_heartbeat_ms) {
    ResumedAfterPauseLocked(now - last_tick_mono_);
  }
}

void ControlPlane::ResumedAfterPauseLocked(DurationMs paused) {
  logging::Warn("server", "the scheduling loop did not run for " + FormatDurationMs(paused) +
                             " (paused or stalled): every node gets a fresh node_timeout from now");
  sched_->ForgiveSilence(paused);
}

// Says each change of the eviction hold once (issue 37).
void ControlPlane::LogEvictionHold() {
  const std::string& hold = sched_->eviction_hold();
  if (hold == eviction_hold_said_) return;
  logging::Warn("server", hold.empty() ? "evictions resumed: fewer than half of the nodes are silent"
                                       : "evictions held: " + hold);
  eviction_hold_said_ = hold;
}

void ControlPlane::RunOnce() {
  // Keyed submissions' keys are read in the store first, without mu_ (issue 40).
  std::vector<PostedSubmission> keyed = TakeKeyedSubmissions();
  std::unique_lock<std::mutex> lock(mu_);
  // First the agents' messages: a heartbeat that waited here while the loop was busy counts
  // before the liveness rules of Tick look at it.
  (void)ApplyPostedLocked();  // this round flushes, commits and passes anyway
  for (PostedSubmission& p : keyed) AdmitPostedLocked(p);
  const int64_t passes = sched_->stats().passes;
  const int64_t t0 = clock_.NowNs();
  ForgivePauseBeforeTickLocked();
  sched_->Tick();
  if (loop_watches_pauses_) last_tick_mono_ = clock_.MonoMs();
  LogEvictionHold();
  if (sched_->stats().passes != passes) metrics_.ObservePass((clock_.NowNs() - t0) * 1e-9);
  for (TaskId id : sched_->MarkIdle(config_.idle_after_ms)) {
    if (!config_.idle_stop) continue;
    // Killed through the normal path (the kill waits for the failed record to be durable).
    (void)sched_->StopIdle(id, "idle: 0 % GPU utilisation for " +
                                   FormatDurationMs(config_.idle_after_ms));
  }
  StageChanges();
  if (pipeline_.ShouldLead()) LeadCommit(lock);
  ApplyRetention();  // after the commit: what it made durable may leave memory now
  AnswerSubmissions(lock);  // refused ones (the spec's errors) when nothing was committed
}

// ---------------------------------------------------------------- flush and commit

uint64_t ControlPlane::StageChanges() {
  const uint64_t seq = pipeline_.next_commit();  // the commit that will carry what is queued now
  std::vector<core::Action> actions = sched_->TakeActions();
  for (const core::Action& a : actions) {
    if (a.kind != core::Action::Kind::kAssign) continue;
    const core::Task* t = sched_->GetTask(a.task);
    if (t != nullptr && t->placement) last_placement_[a.task] = *t->placement;
    if (t != nullptr && !a.gang_nodes.empty()) last_gang_[a.task] = a.gang_nodes;
  }
  for (TaskId id : sched_->TakeChangedTasks()) {
    const core::Task* t = sched_->GetTask(id);
    if (t == nullptr) continue;
    index_.Put(id.value(), t->state, clock_.MonoMs());
    const std::array<int64_t, 6> print = Fingerprint(*t);
    auto [it, fresh] = persisted_.try_emplace(id, print);
    if (!fresh && it->second == print) continue;
    PendingWrite& staged = pipeline_.pending();
    if (!fresh && OnlyPtChanged(it->second, print) && staged.tasks.count(id) == 0) {
      staged.demotions.insert(id);  // issue 43: written in the background
    } else {
      staged.demotions.erase(id);
      staged.tasks.insert(id);
    }
    it->second = print;
    changes_.Add(id.value());
  }
  if (changes_.Seal()) changes_cv_.notify_all();
  for (core::Action& a : actions) pipeline_.HoldAction(std::move(a));  // until `seq` is durable
  return seq;
}

Status ControlPlane::CommitThrough(std::unique_lock<std::mutex>& lock, uint64_t seq) {
  while (!pipeline_.IsDurable(seq)) {
    if (std::optional<Status> failed = pipeline_.FailureOf(seq)) return *failed;
    if (!pipeline_.committing()) {
      LeadCommit(lock);
    } else {
      commit_cv_.wait(lock);
    }
  }
  return Status::Ok();
}

// One group commit: everything queued so far, written with mu_ released so that decisions
// and other callers go on meanwhile (what they change rides in the next commit).
void ControlPlane::LeadCommit(std::unique_lock<std::mutex>& lock) {
  CommitPipeline::Started commit = pipeline_.Begin(CommitBudget());
  std::vector<TaskId> submissions;
  store::WriteBatch batch = BuildBatch(commit.write, submissions);
  lock.unlock();
  const int64_t t0 = clock_.NowNs();
  Status s = batch.empty() ? Status::Ok() : store_->Commit(batch);
  const int64_t t1 = clock_.NowNs();
  lock.lock();
  if (!batch.empty()) metrics_.ObserveCommit((t1 - t0) * 1e-9);
  if (s.ok()) {
    pipeline_.Committed(commit.seq);
    for (const store::TaskRecord& r : batch.tasks) {
      if (sched_->GetTask(r.task.id) != nullptr) durable_state_[r.task.id] = r.task.state;
    }
    OnCommitted(submissions);
  } else {
    OnCommitFailed(commit.seq, s, std::move(commit.write), submissions);
  }
  commit_cv_.notify_all();
  if (pipeline_.HasWork()) Kick();
  AnswerSubmissions(lock);
}

store::CommitCost ControlPlane::TaskCost(TaskId id, const store::CommitLimits& limits) const {
  store::CommitCost c;
  const core::Task* t = sched_->GetTask(id);
  if (t == nullptr) return c;  // withdrawn: not written
  auto placed = last_placement_.find(id);
  c.Put(20, store::EncodedTaskBound(*t, placed == last_placement_.end()
                                            ? std::nullopt
                                            : std::optional<core::Placement>(placed->second)),
        limits);
  return c;
}

CommitPipeline::Budget ControlPlane::CommitBudget() const {
  CommitPipeline::Budget b;
  b.limits = store_->Limits();
  b.task = [this, limits = b.limits](TaskId id) { return TaskCost(id, limits); };
  b.peak = [this, limits = b.limits](const core::MemoryProfile& p) {
    const auto& learned = sched_->memory_table().learned();
    const auto it = learned.find(p);
    const size_t name = store::EncodeProfile(p).size();
    store::CommitCost c;
    c.Put(name, 6 * name + 24 * (it == learned.end() ? 0 : it->second.recent.size()) + 128,
          limits);
    return c;
  };
  return b;
}

store::WriteBatch ControlPlane::BuildBatch(const PendingWrite& w,
                                           std::vector<TaskId>& submissions) {
  store::WriteBatch batch;
  batch.tasks.reserve(w.tasks.size() + w.demotions.size());
  for (const std::set<TaskId>* ids : {&w.tasks, &w.demotions}) {
    for (TaskId id : *ids) {
      const core::Task* t = sched_->GetTask(id);
      if (t == nullptr) continue;  // withdrawn, or (a demotion) finished and written since
      if (sched_->IsHeld(id)) submissions.push_back(id);
      store::TaskRecord r{*t, std::nullopt};
      if (auto it = last_placement_.find(id); it != last_placement_.end()) {
        r.last_placement = it->second;
      }
      batch.tasks.push_back(std::move(r));
    }
  }
  for (const auto& [name, n] : w.nodes) batch.nodes.push_back(n);
  batch.removed_nodes.assign(w.removed_nodes.begin(), w.removed_nodes.end());
  batch.idempotency_keys = w.keys;
  const auto& learned = sched_->memory_table().learned();
  for (const core::MemoryProfile& p : w.peaks) {
    if (auto it = learned.find(p); it != learned.end()) {
      batch.peaks.push_back({p, it->second.recent, it->second.observations});
    } else {
      batch.forgotten_peaks.push_back(p);  // `profile rm`
    }
  }
  for (const auto& [id, t] : w.tokens) {
    if (t) {
      batch.tokens.push_back(*t);
    } else {
      batch.revoked_tokens.push_back(id);
    }
  }
  for (const auto& [team, q] : w.quotas) {
    if (q) {
      batch.quotas.push_back(*q);
    } else {
      batch.removed_quotas.push_back(team);  // `quota rm`
    }
  }
  return batch;
}

void ControlPlane::OnCommitted(const std::vector<TaskId>& submissions) {
  bool released = false;
  for (TaskId id : submissions) {
    if (sched_->IsHeld(id)) released = sched_->Release(id).ok() || released;  // may run now
    TaskId first = id;
    if (SplitSubmissions::Split* split = splits_.Find(id)) {  // issue 38: answered when whole
      if (++split->stored < split->count) continue;
      first = split->first;
      splits_.Erase(first);
    }
    recent_keys_.Committed(first);
    waiters_.Committed(first);  // a request's first id, its retries
  }
  if (released) Kick();  // a pass for them (a synchronous submitter kicks on its own too)
  ReleaseHeld();
}

// Nothing of the batch is stored (or, issue 38, its outcome is unknown: Unavailable; the
// store then refuses writes and the server steps down, and the submitters are told to retry
// with their key). Held submissions are withdrawn from memory (their callers get kNotStored,
// or Unavailable, and no trace is left); so is the rest of a split one, whose stored parts
// stay (its caller is told which). Every other change is carried into the next commit, and
// the messages that wait for it stay held.
void ControlPlane::OnCommitFailed(uint64_t seq, const Status& s, PendingWrite w,
                                  const std::vector<TaskId>& submissions) {
  metrics_.AddStoreError();
  const bool unknown = s.code() == StatusCode::kUnavailable;
  const Status why =
      unknown ? Unavailable(s.message() + "; submit again with the same idempotency key: it "
                                          "finds the tasks if they were stored")
              : NotStored("task not stored (" + s.message() + "); nothing was queued: submit again");
  std::set<TaskId> posted;  // the ids of posted requests (answered here, not Withdrawn)
  for (TaskId id : submissions) {
    TaskId first = id;
    Status answer = why;
    if (SplitSubmissions::Split* split = splits_.Find(id)) {
      first = split->first;
      if (split->stored > 0 && !unknown) {
        answer = SplitSubmissions::Partly(first, split->count, split->stored, s.message());
      }
      WithdrawSplitRest(*split, w);
      splits_.Erase(first);
    }
    for (TaskId each : waiters_.Failed(first, answer)) posted.insert(each);
  }
  for (TaskId id : submissions) {
    if (!sched_->IsHeld(id)) continue;
    if (std::optional<std::string> key = recent_keys_.Withdraw(id)) w.keys.erase(*key);
    w.tasks.erase(id);
    w.submissions.erase(id);
    Forget(id);
    if (posted.count(id) == 0) pipeline_.Withdrawn(id, s);  // for its synchronous submitter
  }
  // The rest rides in the next commit; the messages that wait for it stay held.
  const DurationMs backoff = pipeline_.Failed(seq, s, std::move(w));
  logging::Error("store", "commit failed (" + s.ToString() + "); " +
                              std::to_string(submissions.size()) + " submitted tasks " +
                              (unknown ? "answered \"outcome unknown\"" : "refused") +
                              ", other changes retried in " + std::to_string(backoff) + " ms");
}

void ControlPlane::WithdrawSplitRest(const SplitSubmissions::Split& s, PendingWrite& w) {
  const uint64_t from = s.first.value() + s.stored;
  const uint64_t to = s.first.value() + s.count;
  if (std::optional<std::string> key = recent_keys_.Withdraw(s.first)) w.keys.erase(*key);
  for (PendingWrite* staged : {&w, &pipeline_.pending()}) {
    for (auto k = staged->keys.begin(); k != staged->keys.end();) {  // its part keys
      k = k->second >= from && k->second < to ? staged->keys.erase(k) : std::next(k);
    }
  }
  for (uint64_t id = from; id < to; ++id) {
    w.tasks.erase(TaskId(id));
    w.submissions.erase(TaskId(id));
    Forget(TaskId(id));  // from the scheduler and what is staged
  }
}

// Sends every held message whose commit is durable, in the order the decisions were made.
void ControlPlane::ReleaseHeld() {
  bool changed = false;
  for (Outbound& o : pipeline_.TakeReleasable()) {
    switch (o.kind) {
      case Outbound::Kind::kAssign:
        changed |= SendAssign(o.action);
        break;
      case Outbound::Kind::kKill: {
        TaskKill k{o.action.task, o.action.attempt, o.action.reason, std::nullopt};
        if (o.action.grace_ms >= 0) k.grace_ms = o.action.grace_ms;
        SendTo(o.action.node, std::move(k));
        break;
      }
      case Outbound::Kind::kAck:
        if (auto ch = o.channel.lock()) {
          if (!ch->Send(StatusAck{TaskId(o.task), o.attempt})) ch->Close();
        }
        break;
    }
  }
  if (changed) {
    StageChanges();  // bind failures: written (and their retries held) by the next commit
    Kick();
  }
}

// Returns true when the scheduler changed (a bind failure).
bool ControlPlane::SendAssign(const core::Action& a) {
  const core::Task* t = sched_->GetTask(a.task);
  // Attempt fencing: a held assignment the scheduler has since taken back is not sent.
  if (t == nullptr || !t->placement || t->attempts != a.attempt || a.rank < 0 ||
      static_cast<size_t>(a.rank) > t->gang_placements.size()) {
    return false;
  }
  const core::Placement& at =
      a.rank == 0 ? *t->placement : t->gang_placements[static_cast<size_t>(a.rank - 1)];
  if (at.node != a.node) return false;
  const std::shared_ptr<AgentChannel> conn = agents_.Channel(a.node);
  if (conn == nullptr) {
    // DESIGN.md pipeline step 5: the bind failed; the reservation is released (FQ).
    (void)sched_->TaskFinished(a.task, a.attempt, -1, 0,
                               "bind failed: the agent of node " + a.node + " is not connected");
    return true;
  }
  TaskAssignment as;
  as.id = a.task;
  as.attempt = a.attempt;
  as.name = t->spec.name;
  as.gpus.assign(a.gpus.begin(), a.gpus.end());
  as.gpu_mem_mib.assign(a.gpu_mem_mib.begin(), a.gpu_mem_mib.end());
  as.command = t->spec.command;
  as.env = t->spec.env;
  if (!a.gang_nodes.empty() || t->spec.tasks_per_node > 1) {
    as.rank = a.rank;
    for (auto& [k, v] : GangEnvironment(*t, a, sched_->cluster())) as.env[k] = std::move(v);
  }
  as.duration_ms = t->spec.duration_ms;
  as.heartbeat_timeout_ms = t->spec.heartbeat_timeout_ms;
  as.stop_signal = t->spec.stop_signal;  // issue 37
  as.workdir = t->spec.workdir;
  as.cgroup_mem_mib = t->spec.resources.mem_mib;
  as.cgroup_cpu_milli = t->spec.resources.cpu_milli;
  // Issue 35: the user is one the server proved, by a token, or with authentication off by
  // the owner of the submitter's connection (else config_.default_user); a root agent runs the
  // task as that account. Only a submission proven to be root's may run as uid 0 without
  // allow_root_tasks (with tokens, "root" is just a name an admin gave a token).
  as.user = t->spec.user;
  as.submitted_by_root = !config_.AuthEnabled() && t->spec.user == "root";
  // A full outbox: the agent stopped reading. Cut it off; it reconciles when it reconnects
  // (the assignment is then re-placed without counting a failure).
  if (!conn->Send(std::move(as))) conn->Close();
  return false;
}

bool ControlPlane::SendTo(const std::string& node, AgentOrder m) {
  const std::shared_ptr<AgentChannel> conn = agents_.Channel(node);
  if (conn == nullptr) return false;
  if (conn->Send(std::move(m))) return true;
  conn->Close();
  return false;
}

// ---------------------------------------------------------------- memory bounds

void ControlPlane::Forget(TaskId id) {
  const core::Task* t = sched_->GetTask(id);
  if (t == nullptr) return;
  const bool held = sched_->IsHeld(id);
  if (held) {
    (void)sched_->Withdraw(id);
  } else if (!sched_->Forget(id).ok()) {
    return;  // not terminal
  }
  index_.Remove(id.value(), /*left_finished=*/!held);
  last_placement_.erase(id);
  last_gang_.erase(id);
  persisted_.erase(id);
  durable_state_.erase(id);
  pipeline_.pending().tasks.erase(id);
  pipeline_.pending().submissions.erase(id);  // a submission (or part) it was the first of
}

// Finished tasks leave memory, oldest first, once over the count or past the age, and only
// once their last record is durable (not queued and not in the commit being written).
void ControlPlane::ApplyRetention() {
  using Retire = TaskIndex::Retire;
  index_.ApplyRetention(clock_.MonoMs(), config_.retain_finished, config_.retain_finished_ms,
                        [this](uint64_t raw) {
                          const TaskId id(raw);
                          const core::Task* t = sched_->GetTask(id);
                          if (t == nullptr || !core::IsTerminal(t->state)) return Retire::kGone;
                          if (pipeline_.Unstored(id)) return Retire::kWait;
                          Forget(id);
                          return Retire::kRetired;
                        });
}

Status ControlPlane::CheckInvariants() {
  std::lock_guard<std::mutex> lock(mu_);
  return sched_->CheckInvariants();
}

size_t ControlPlane::TasksInMemory() {
  std::lock_guard<std::mutex> lock(mu_);
  return sched_->task_count();
}

}  // namespace gpusched::server
