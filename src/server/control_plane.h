#pragma once
// ControlPlane: the server's state and its one lock. It owns core::Scheduler (the decisions),
// the StateStore (durability) and the connected agents (AgentChannel), runs the scheduling
// loop, and turns every event (API call, agent message, probe result, time) into scheduler
// calls followed by a flush.
//
// Persist before act (DESIGN.md "State"):
//  - A submission is held out of the queues until the commit carrying its record returned
//    OK; then it is acknowledged. When that commit fails, the task is withdrawn (no trace:
//    nothing acted on it) and the caller gets kNotStored, never "unreachable".
//  - Every message to an agent (assign, kill, ack of an exit) waits for the commit that
//    carries the record explaining it; a failed commit is retried with backoff and the
//    messages stay held meanwhile. A held assignment whose attempt is no longer current when
//    it is released is dropped (attempt fencing).
//  - Group commit: one commit at a time; everything changed while it runs rides in the
//    next one, so no caller waits for more than the commit in flight plus its own.
//
// Two-way reconciliation when an agent registers: the exits it reports are applied first
// (each once: attempt fencing), then tasks the server placed there that the agent does not
// run go back to Q without counting a failure, and tasks it runs that the server does not
// know are killed.
//
// Bounded memory: finished tasks leave memory after a retention (count and age) once their
// record is durable; `ls`, `show` and metrics read the store and O(states) counters.
//
// Thread-safety: every public method is safe to call from any thread (one mutex). The store
// is written without the mutex held (by the thread leading a group commit).

#include <array>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/executor.h"
#include "base/units.h"
#include "core/scheduler.h"
#include "server/config_reload.h"
#include "server/loop_inbox.h"
#include "server/recent_keys.h"
// Issue 40: the agent side speaks core structs both ways (agent_messages.h: registrations,
// reports, orders), converted by the agent stream's door (agent_convert.h); the
// client-facing API answers views (views.h). No gpusched.v1 message reaches this header.
#include "server/agent_channel.h"
#include "server/agent_messages.h"
#include "server/agent_registry.h"
#include "server/change_log.h"
#include "server/commit_pipeline.h"
#include "server/server_config.h"
#include "server/server_metrics.h"
#include "server/split_submissions.h"
#include "server/submission_waiters.h"
#include "server/stream_limits.h"
#include "server/task_index.h"
#include "server/task_usage.h"
#include "server/views.h"
#include "server/tokens.h"
#include "store/state_store.h"
#include "store/task_archive.h"

namespace gpusched::server {

class ControlPlane {
 public:
  // Restores the stored nodes, live tasks and learned memory peaks; corrupt rows are
  // quarantined and named on stderr. Restored nodes stay unreachable until their agent
  // reconnects; their running tasks keep their reservations meanwhile.
  static StatusOr<std::unique_ptr<ControlPlane>> Create(const ServerConfig& config, Clock& clock,
                                                        std::unique_ptr<store::StateStore> store);
  ~ControlPlane();

  // The scheduling loop: a pass on every event and at least every t1; liveness, retention
  // and store retries every tick. Without it, a test drives the same work with RunOnce().
  void StartLoop();
  void StopLoop();
  void RunOnce();

  // ---- API ----
  // `idempotency_key` "" = none. A key seen before returns the task it created.
  StatusOr<TaskId> Submit(core::TaskSpec spec, const std::string& idempotency_key = "");
  // A job array (`submit --array A-B`): one task per index of `range`, each with
  // GPUSCHED_ARRAY_INDEX=i in its environment and named NAME[i] ([i] without a name), with
  // consecutive ids in index order. All are admitted together; an array too large for one
  // store commit (issue 38) is stored in several, in order (split_submissions.h): the answer
  // is the ids once all are stored; when one fails, FailedPrecondition naming the tasks
  // stored (kNotStored when none is). A retry with the same key returns the same ids (or
  // names the stored tasks again).
  StatusOr<std::vector<TaskId>> SubmitArray(core::TaskSpec spec, IndexRange range,
                                            const std::string& idempotency_key = "");
  // Submit without waiting, for the gRPC server's completion queue: the submission is
  // posted for the loop, which admits what was posted in that order, stores it in its next
  // group commit and then calls `done` once, holding no lock of the control plane: with the
  // task's id once its record is durable, or with the error (the spec's; kNotStored when
  // that commit failed or the loop stopped first). With kMaxPosted submissions already
  // posted, or once the loop stopped, `done` is called before this returns (kUnavailable).
  // The caller's thread never waits for mu_ or the store.
  using SubmitDone = std::function<void(StatusOr<TaskId>)>;
  void PostSubmission(core::TaskSpec spec, SubmitDone done);
  // Issue 40: PostSubmission for what the CLI sends (an idempotency key; "" = none) and for
  // job arrays (`specs` from ArraySpecs; all admitted together, consecutive ids, `done` gets
  // them in order). The loop reads a key the store may hold outside mu_, before the round
  // that admits it; a retry of a key whose first submission waits for its commit waits for
  // that commit without holding a thread. Bounded with the others by kMaxPosted (answered
  // kUnavailable, "submit again", when full).
  using SubmitManyDone = server::SubmitManyDone;
  void PostSubmissions(std::vector<core::TaskSpec> specs, std::string idempotency_key,
                       SubmitManyDone done);
  // A job array's specs: one per index of `range`, GPUSCHED_ARRAY_INDEX=i in its environment
  // and named NAME[i]; InvalidArgument naming `array` for a range SubmitArray refuses.
  static StatusOr<std::vector<core::TaskSpec>> ArraySpecs(const core::TaskSpec& spec,
                                                          IndexRange range);
  // Issue 40: the task API answers views (server/views.h); the doors convert them
  // (server/api_convert.h).
  StatusOr<TaskView> GetTask(uint64_t id);
  // Tasks with id > after_id, ascending; `limit` 0 = 1000. Live states come from memory,
  // the others from the store's state index.
  StatusOr<ListPage> ListTasks(std::optional<core::TaskState> state, uint64_t after_id,
                               size_t limit);
  // The same over any of `states` (empty = every task), each task once in the state it is in
  // now: live states are read under one lock (one snapshot), a set with a finished state
  // pages through every task and keeps those in the set (a page may then come back short or
  // empty with a next_after_id to go on from).
  StatusOr<ListPage> ListTasksIn(const std::set<core::TaskState>& states, uint64_t after_id,
                                 size_t limit);
  // The tasks in memory (live and recently finished), for Watch's first snapshot.
  std::vector<TaskView> RecentTasks();
  StatusOr<TaskView> Cancel(uint64_t id);
  StatusOr<core::Explanation> Why(uint64_t id);
  std::vector<NodeView> ListNodes();
  // (node, GPU index) -> the GPU's memory in MiB, of the nodes known now (accounting's GPU
  // shares; server/accounting.h GpuTotals).
  GpuTotals GpuTotalMib();
  // Issue 37: why evictions of silent nodes are held, "" when they are not
  // (core::Scheduler::eviction_hold).
  std::string EvictionHold();
  StatusOr<NodeView> Cordon(const std::string& node, bool cordon);
  // Slurm's drain (running tasks finish); `evict`: kubectl's (they are requeued).
  StatusOr<NodeView> Drain(const std::string& node, bool evict = false);
  // Issue 39, `gpusched node rm`: forgets the node (Scheduler::RemoveNode: refused with
  // assigned or running tasks unless `force`, which requeues them without counting a
  // failure), deletes its record once that is durable, and closes its agent's stream (an agent
  // that connects again registers as a new node). Returns the tasks requeued.
  StatusOr<std::vector<TaskId>> RemoveNode(const std::string& node, bool force);
  // Issue 39, `gpusched admin reload` and SIGHUP: reads the --config file again
  // (ConfigReloader), applies its live keys to the scheduler and says which changed keys need
  // a restart. A bad file changes nothing (its error). FailedPrecondition without --config.
  StatusOr<ConfigReload> ReloadConfig();
  struct LogSource {
    std::string address;  // the agent's --listen address
    std::string node;     // its name (what its TLS certificate names)
    int64_t attempt = 0;
    bool done = false;
    // The key of the node's current registration (issue 35): the reader signs with it.
    std::string log_read_key;
  };
  // `rank`: a gang's rank (its node's log); InvalidArgument past the task's ranks.
  // `attempt`: an earlier attempt's log (issue 41; rank 0 only); 0 = the latest.
  StatusOr<LogSource> LogSourceOf(uint64_t id, int rank = 0, int64_t attempt = 0);
  // Team quotas (core/quota.h): applied to the scheduler and stored (restored at start and at
  // an HA take-over). Field-named errors.
  // `keep_guarantee`: only the grant changes (issue 36). quota.max_priority "" keeps the
  // team's grant, "none" removes it.
  // Returns the quota applied.
  StatusOr<core::TeamQuota> SetQuota(core::TeamQuota quota, bool keep_guarantee = false);
  // `quota rm TEAM` (issue 41): the team goes back to no quota (guarantee 0, unlimited
  // borrowing), stored. NotFound naming the team when it has none.
  Status RemoveQuota(const std::string& team);
  // Every team with a quota or a live task, by name.
  std::vector<TeamQuotaView> ListQuotas();
  // What the GPU-memory table learned, by key (issue 36; admin only).
  std::vector<LearnedProfileView> ListLearnedProfiles();  // by key
  // Forgets the learned peaks of the profile `key` names (as `profile ls` prints it, or any
  // `--profile` form) and stores that. NotFound when nothing is learned for it.
  StatusOr<LearnedProfileView> RemoveLearnedProfile(const std::string& key);
  // A consistent snapshot of the store written to `path`, a new file (store::StateStore::
  // SnapshotTo): every task acknowledged before the call is in it.
  Status Backup(const std::string& path);
  // Issue 39: Ok while the store takes writes; else why not (store::StateStore::Health:
  // FailedPrecondition naming the removed or replaced file). Submissions are refused with
  // it before they are admitted; /healthz and /metrics report it.
  Status StoreHealth() { return store_->Health(); }
  // Issue 39: the store's cluster id (store::StateStore::ClusterId), sent to every agent in
  // Registered.cluster_id.
  const std::string& ClusterId() const { return store_->ClusterId(); }
  // The fair-share factor of (team, user) now, F(team) * F(user) (core/fair_share.h).
  double FairShareOf(const std::string& team, const std::string& user);
  // Waits up to `timeout_ms` for task changes after `since`; returns the new version and
  // appends the ids that changed (all ids when `since` is too old for the change log).
  uint64_t WaitForChanges(uint64_t since, DurationMs timeout_ms, std::vector<uint64_t>& ids,
                          bool& everything);

  // ---- authentication (control_plane_tokens.cc; server/tokens.h) ----
  // Who calls, from a request's credentials: `authorization` is the Authorization header or
  // metadata value ("" = none). With authentication on, a valid bearer token is required
  // (Unauthenticated otherwise); with it off, everyone is an admin named `local_user` in
  // team "default": issue 35, the Unix account the caller's connection proves on this machine
  // (server/peer_identity.h), else config().default_user; what the client claims
  // (x-gpusched-user) is never an identity. Tasks run as that account.
  StatusOr<Caller> Authenticate(const std::string& authorization, const std::string& local_user);
  bool auth_enabled() const { return config_.AuthEnabled(); }
  // Issue 35: Ok when `authorization` ("Bearer TOKEN") carries an agent token bound to `node`
  // (TokenTable::AuthenticateAgent); Unauthenticated naming what to do when it carries none.
  Status AuthenticateAgent(const std::string& authorization, const std::string& node);
  // Creates a token and returns it once its record is durable (NotStored, and no token,
  // when that commit fails). Callers check that the caller is an admin.
  StatusOr<MintedToken> CreateToken(const std::string& user, const std::string& team,
                                    bool admin);
  // The same for an agent token bound to node `node` (MintAgentToken).
  StatusOr<MintedToken> CreateAgentToken(const std::string& node);
  std::vector<store::TokenRecord> ListTokens();  // ascending id
  // Stops accepting the token at once, then stores that (NotStored when the commit failed:
  // the token stays refused here and the deletion is retried).
  StatusOr<store::TokenRecord> RevokeToken(const std::string& id);
  size_t TokenCount();

  // ---- views (control_plane_views.cc), each taken under one lock ----
  // The first `limit` tasks of Q and of FQ with their explanations.
  QueuesView Queues(size_t limit);
  // Nodes and the tasks holding their GPUs, consistent with each other.
  ClusterView Cluster();

  // ---- agents ----
  // Issue 37: refuses (kAlreadyExists, naming the other's address) a registration under the
  // name of a node that is alive: connected through another agent instance, heard from within
  // node_timeout. Checked before AgentRegistered; an agent without an instance id passes.
  Status AdmitAgent(const AgentRegistration& reg);
  Status AgentRegistered(const AgentRegistration& reg, std::shared_ptr<AgentChannel> channel);
  // Issue 43: the AgentLink handler's path for a registration: AdmitAgent, then (calling
  // `r.admitted` in between) AgentRegistered, on the loop's next round with every other
  // registration posted meanwhile; `r.done` gets the outcome (loop_inbox.h). The completion
  // queue's thread never waits for mu_, and a reconnecting fleet is admitted in a few rounds,
  // with one pass for all. Once the loop has stopped, `r.done` is called with kUnavailable.
  void PostRegistration(PostedRegistration r);
  void AgentMessage(const std::string& node, AgentReport m,
                    const std::shared_ptr<AgentChannel>& channel);
  // The AgentLink handler's path: queues the message for the loop, which applies what was
  // posted since its last round under one lock, before the pass and the liveness rules. The
  // handler goes back to reading at once instead of waiting for mu_ behind every other agent
  // and client. Messages apply in the order they were posted; AgentMessage and
  // AgentDisconnected apply what is posted first. A message of a channel that has closed, or
  // whose node registered again since, is dropped (the agent repeats what was not acked).
  // At most kMaxPosted wait: a handler that finds the inbox full waits for the loop to take
  // it (the agent's stream is not read meanwhile, so flow control slows the agent down);
  // once the loop has stopped, messages are dropped instead.
  static constexpr size_t kMaxPosted = 65'536;
  void PostAgentMessage(const std::string& node, AgentReport m,
                        const std::shared_ptr<AgentChannel>& channel);
  void AgentDisconnected(const std::string& node, const AgentChannel* channel);
  // The AgentLink handler's path: AgentDisconnected on the loop's next round, after what the
  // channel posted before (never waits for mu_).
  void PostAgentDisconnected(const std::string& node,
                             const std::shared_ptr<AgentChannel>& channel);
  // Closes every agent's stream (a leader stepping down): agents reconnect, to the new leader.
  void DisconnectAgents();

  // ---- probe daemon (CN115981827A claim 9) ----
  using ProbeTarget = AgentRegistry::ProbeTarget;
  // Connected nodes, by name; `first_only`: those waiting for their first probe.
  std::vector<ProbeTarget> ProbeTargets(bool first_only = false);
  void SetProbeResult(const std::string& node, bool reachable);
  // While a prober is attached, a node that registers is unreachable until SetProbeResult
  // says otherwise, and `wake` is called (with the lock held: it must not call back) so that
  // it is probed at once. nullptr detaches; no `wake` runs after that returns.
  void AttachProber(std::function<void()> wake);

  // ---- bounded history (issue 38; control_plane_history.cc) ----
  // Where finished tasks go after history_retention. Null (the default): nothing is archived
  // or deleted. Set before StartLoop, once.
  void SetArchive(std::unique_ptr<store::TaskArchive> archive);
  // One bounded round: up to kArchiveBatch finished tasks that memory no longer holds and
  // that finished (wall clock) more than history_retention ago are appended to the archive,
  // then deleted from the store (DeleteArchived); a failed archive write deletes nothing.
  // Returns how many moved. Runs without mu_ held during I/O; the archiver thread calls it
  // every kArchiveEvery, and batch after batch while they come back full. One caller at a time.
  // At most kArchiveBatch tasks a batch: one archive transaction, then as many store commits
  // as the store's limits need (DeleteArchived). A round moves up to kArchiveBatchesPerRound
  // batches while there is a backlog.
  static constexpr size_t kArchiveBatch = 500;
  static constexpr int kArchiveBatchesPerRound = 4;
  size_t ArchiveBatch() const;
  static constexpr DurationMs kArchiveEvery = 60'000;
  StatusOr<size_t> ArchiveHistory();
  // A task the store no longer holds, from the archive (NotFound without one).
  StatusOr<TaskView> GetArchivedTask(uint64_t id);
  // Archived tasks that finished at or after `since_ms`, id > after_id, that no rollup row
  // counts (archived before issue 38's rollups; acct).
  StatusOr<ListPage> ListArchived(TimeMs since_ms, uint64_t after_id, size_t limit);
  // Issue 38: the rollup rows of the UTC days that [since_ms, until_ms) touches (acct).
  StatusOr<std::vector<store::RollupRow>> ListRollups(TimeMs since_ms, TimeMs until_ms);
  // ---- observability ----
  // O(states + nodes), never O(tasks). `with_teams` false: no series names a team.
  std::string MetricsText(bool with_teams = true);
  const ServerConfig& config() const { return config_; }
  Clock& clock() { return clock_; }
  // Open Watch and REST event/log streams, per user and in total (stream_limit keys).
  StreamLimiter& streams() { return streams_; }
  // For tests: accounting invariants of the scheduler, and what is in memory.
  Status CheckInvariants();
  size_t TasksInMemory();

 private:
  // LogSourceOf's parts: the node of an earlier attempt's rank 0, and the agent holding a
  // node's logs (address, log-read key).
  static StatusOr<std::string> EarlierAttemptNode(
      uint64_t id, int node_rank, int64_t attempt, int64_t latest,
      const std::map<int64_t, std::string>& attempt_nodes);
  LogSource WithAgentOf(std::string node, LogSource src);
  // Stores a freshly minted token (CreateToken, CreateAgentToken).
  StatusOr<MintedToken> StoreToken(MintedToken m);
  // A message for an agent that waits for a commit, and what the next commit carries.
  using Outbound = CommitPipeline::Outbound;
  using PendingWrite = CommitPipeline::PendingWrite;

  ControlPlane(const ServerConfig& config, Clock& clock, std::unique_ptr<store::StateStore> store,
               std::unique_ptr<ThreadPool> filter_pool,
               std::unique_ptr<core::Scheduler> scheduler);
  Status Restore();
  // Restore's steps, in order. REQUIRES: mu_ held (within Restore).
  StatusOr<std::set<std::string>> RestoreNodes();  // the names of the nodes restored
  void RestoreTasks(const store::LiveTasks& live);
  Status RestoreFairShareUsage();
  StatusOr<size_t> RestoreTablesAndCounts();  // peaks, tokens, quotas; returns the peaks' count
  // Submit and SubmitArray: admits every spec (or none) as the posts do (AdmitPostedLocked),
  // stores them in one commit (in parts, each one commit, when they do not fit one: issue
  // 38), leading commits until answered, and answers their ids in order. A key seen before
  // answers the ids it created.
  StatusOr<std::vector<TaskId>> SubmitAll(std::vector<core::TaskSpec> specs,
                                          const std::string& idempotency_key);
  void LoopMain();
  void ResumedAfterPauseLocked(DurationMs paused);  // REQUIRES: mu_
  void ForgivePauseBeforeTickLocked();             // REQUIRES: mu_
  void LogEvictionHold();  // REQUIRES: mu_ held
  void Kick();

  // Takes mu_: applies `change` (a scheduler call about `node`), stores the node and what the
  // change caused, then answers with the node.
  StatusOr<NodeView> ChangeNode(const std::string& node, const std::function<Status()>& change);

  // ---- REQUIRES: mu_ held (everything below) ----
  // Moves the scheduler's changes and actions into the next commit and the held messages.
  // Returns the commit that makes them durable.
  uint64_t StageChanges();
  // Makes every change up to commit `seq` durable, leading group commits as needed.
  // Returns that commit's status (retried writes: the status of the last try).
  Status CommitThrough(std::unique_lock<std::mutex>& lock, uint64_t seq);
  void LeadCommit(std::unique_lock<std::mutex>& lock);
  store::WriteBatch BuildBatch(const PendingWrite& w, std::vector<TaskId>& submissions);
  void OnCommitted(const std::vector<TaskId>& submissions);
  void OnCommitFailed(uint64_t seq, const Status& s, PendingWrite w,
                      const std::vector<TaskId>& submissions);
  void ReleaseHeld();
  bool SendAssign(const core::Action& a);
  bool SendTo(const std::string& node, AgentOrder m);
  void Forget(TaskId id);
  void ApplyRetention();
  // ArchiveHistory's scan: finished tasks older than `cutoff` that memory no longer holds,
  // from history_cursor_ on (bounded pages; the cursor goes back to 0 once past the end or
  // past the tasks submitted before `cutoff`).
  StatusOr<std::vector<store::TaskRecord>> FindOldHistory(TimeMs cutoff);
  // The stored record of `id`, else the archived one (NotFound when neither has it).
  StatusOr<store::TaskRecord> StoredOrArchived(uint64_t id);
  // The archiver thread (started with the loop): ArchiveHistory batch after batch while a
  // backlog lasts, else every kArchiveEvery; failures are logged. Its own thread, so that
  // deleting history at thousands of tasks a second never delays a scheduling pass.
  void ArchiverMain();
  // One round: batches until one is not full (true: a backlog is left). Failures logged.
  bool ArchiveRound();
  // Deletes archived tasks from the store, each chunk's rollup rows in its commit.
  Status DeleteArchived(const std::vector<store::TaskRecord>& tasks);
  // One chunk's commit: the tasks' deletes and their rollup rows as the store holds them
  // plus what the tasks used (`usage`, one per task).
  StatusOr<store::WriteBatch> ArchiveCommit(std::span<const store::TaskRecord> tasks,
                                           std::span<const TaskUsage> usage);
  TimeMs EndedAt(const TaskReport& st) const;
  void ApplyStatus(const std::string& node, const TaskReport& st,
                   const std::shared_ptr<AgentChannel>& channel);
  void Reconcile(const std::string& node, const AgentRegistration& reg);
  // Issue 39: the agent names a cluster id other than this store's (logged, once per call).
  bool FromAnotherCluster(const std::string& node, const AgentRegistration& reg) const;
  void UpdateReachable(const std::string& node);
  void QueueNode(const std::string& node);
  // What a reader sees of `t` (its last placement and gang, its stored state). REQUIRES: mu_.
  TaskView ViewOf(const core::Task& t) const;
  // The same of a task only the store holds.
  static TaskView ViewOf(store::TaskRecord r);
  // Issue 40: the stored state when `t`'s latest change is not durable yet (queued or in the
  // commit being written) and differs from it; else none. REQUIRES: mu_.
  std::optional<core::TaskState> StoredStateIfBehind(const core::Task& t) const;
  StatusOr<NodeView> NodeViewOf(const std::string& node) const;

  const ServerConfig config_;
  Clock& clock_;
  StreamLimiter streams_{StreamLimits{static_cast<size_t>(config_.stream_limit),
                                      static_cast<size_t>(config_.stream_limit_per_user)}};
  std::unique_ptr<store::StateStore> store_;
  std::unique_ptr<store::TaskArchive> archive_;  // issue 38; null = no archive
  uint64_t history_cursor_ = 0;                  // ArchiveHistory's caller only

  mutable std::mutex mu_;
  std::condition_variable changes_cv_;
  std::condition_variable commit_cv_;
  // CN115981827A claim 1: lent to the scheduler for the parallel node filter; only the
  // scheduler calls it, under mu_. Null when filter_workers is 1. Outlives sched_.
  std::unique_ptr<ThreadPool> filter_pool_;
  std::unique_ptr<core::Scheduler> sched_;
  std::unordered_map<TaskId, core::Placement> last_placement_;
  // A gang's nodes of its latest attempt, in rank order (logs --rank); memory only.
  std::unordered_map<TaskId, std::vector<std::string>> last_gang_;
  // What was last queued for writing per task (state, attempts, fail_cnt, Pt, history
  // length). A pass marks every waiting task changed (its placement_failures and reason
  // move); those records are written again only when this fingerprint changes.
  std::unordered_map<TaskId, std::array<int64_t, 6>> persisted_;
  // Issue 40: the state of each task's last durable record (restored or committed), so a
  // read shows what a restart would find while a newer change waits for its commit.
  std::unordered_map<TaskId, core::TaskState> durable_state_;
  // The connected agents (their instances) and the probe results (agent_registry.h).
  AgentRegistry agents_;  // guarded by mu_
  std::string eviction_hold_said_;  // the hold last logged ("" = none)
  TokenTable tokens_;

  // ---- commit pipeline ----
  // What the next commit carries, the held messages, the retry backoff (commit_pipeline.h).
  CommitPipeline pipeline_{clock_, config_.store_retry_max_ms};  // guarded by mu_
  // Idempotency keys seen lately (recent_keys.h): a retry racing the first submission's
  // commit finds it without the store; older keys are looked up in the store.
  static constexpr size_t kRecentKeys = 100'000;
  RecentKeys recent_keys_{kRecentKeys};

  // The in-memory index (live and retained tasks), O(states) counters and the retention
  // order (task_index.h); which tasks changed in which version, for Watch (change_log.h).
  TaskIndex index_;
  ChangeLog changes_;
  ServerMetrics metrics_;  // GET /metrics: the counters, histograms and the page

  // Applies the posted messages, then the registrations, then admits the posted submissions;
  // true when one asks for a pass or a commit. REQUIRES: mu_.
  bool ApplyPostedLocked();
  Status AdmitAgentLocked(const AgentRegistration& reg) const;  // REQUIRES: mu_
  Status AgentRegisteredLocked(const AgentRegistration& reg,
                               std::shared_ptr<AgentChannel> channel);  // REQUIRES: mu_
  void RegisterPostedLocked(PostedRegistration& r);                  // REQUIRES: mu_
  // The channel's agent is gone; true when that asks for a commit. REQUIRES: mu_.
  bool DisconnectedLocked(const std::string& node, const AgentChannel* channel);
  // Whether an agent's message must wake the loop (PostAgentMessage).
  static bool Urgent(const AgentReport& m);
  // AgentMessage's work (`m`'s heartbeat gets `node` and is handed on, not copied); true when
  // it asks for a pass or a commit. REQUIRES: mu_.
  bool AgentMessageLocked(const std::string& node, AgentReport& m,
                          const std::shared_ptr<AgentChannel>& channel);
  void TaskBeatsLocked(const std::string& node, TaskBeats& beats);  // REQUIRES: mu_
  // Agent messages (PostAgentMessage, PostAgentDisconnected), registrations
  // (PostRegistration) and submissions (PostSubmissions) for the loop.
  LoopInbox inbox_{kMaxPosted};
  // The loop's thread, outside mu_: takes the keyed submissions posted and reads each key in
  // the store. A failed read answers its submission (kUnavailable, nothing queued).
  std::vector<PostedSubmission> TakeKeyedSubmissions();
  // Admits one posted submission (a keyed one: returns the key's tasks, or waits for their
  // commit, instead when the key is known). REQUIRES: mu_.
  void AdmitPostedLocked(PostedSubmission& p);
  // first, first + 1, ... (n ids): a request's tasks.
  // Records `key` as the one of the held submission `first` (SubmitAll's and the posts').
  // REQUIRES: mu_.
  void RememberKeyLocked(const std::string& key, TaskId first);
  // Issue 38: stages the admitted submission `ids` (consecutive) with its key ("" = none) for
  // commit: whole, or in parts that each fit one commit (splits_). REQUIRES: mu_.
  void StageSubmissionLocked(const std::vector<TaskId>& ids, const std::string& key);
  // What a task's record costs a commit, at most (record_codec.h EncodedTaskBound).
  store::CommitCost TaskCost(TaskId id, const store::CommitLimits& limits) const;
  // What one commit may carry and what its records cost (CommitPipeline::Begin).
  CommitPipeline::Budget CommitBudget() const;
  // A failed commit carried part of `s`: its tasks not stored yet are withdrawn (from the
  // scheduler, `w` and what is staged) with their part keys. REQUIRES: mu_.
  void WithdrawSplitRest(const SplitSubmissions::Split& s, PendingWrite& w);
  // Submissions too large for one commit, stored in parts (split_submissions.h).
  SplitSubmissions splits_;  // guarded by mu_

  // The posted submissions waiting for their answer (submission_waiters.h). Guarded by mu_.
  SubmissionWaiters waiters_;
  // Calls the answers decided so far with mu_ released (re-taken before it returns).
  void AnswerSubmissions(std::unique_lock<std::mutex>& lock);
  // Once the loop stopped: every posted or admitted submission not yet durable is withdrawn
  // and answered kNotStored (a commit in flight ends first).
  void AbandonSubmissions();

  std::mutex reload_mu_;                       // one reload at a time
  std::unique_ptr<ConfigReloader> reloader_;   // null without --config; guarded by reload_mu_
  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool kicked_ = false;
  bool stop_ = false;
  // Issue 37: set by LoopMain; RunOnce then forgives a pause (SIGSTOP, a stall) since the
  // previous Tick right before the next one, under mu_, so that no step of the round between
  // the loop's wake-up and Tick can judge nodes for a silence the server did not listen to.
  std::atomic<bool> loop_watches_pauses_{false};
  TimeMs last_tick_mono_ = 0;  // mu_: when the loop's last Tick ran (monotonic)
  std::thread loop_;
  std::thread archiver_;  // issue 38: ArchiverMain
  // The archiver's own wake-up (with loop_mu_ and stop_): a Kick's notify_one of loop_cv_
  // must always reach the loop.
  std::condition_variable archive_cv_;
};

}  // namespace gpusched::server
