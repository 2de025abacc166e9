#pragma once
// EtcdStore: the StateStore of a highly available control plane, in an etcd v3 cluster.
//
// Layout under the prefix (default "/gpusched"):
//   /t/<id, 20 digits>   task record (record_codec JSON)     /n/<name>   node record
//   /k/<key>             idempotency key -> task id           /p/<profile> learned peak
//   /quota/<team>        team quota (JSON)
//   /q/<table>/<key>     quarantined row with its error       /x/<key>/<i> parts of a large value
//   /a/<token id>        an API token's record (its secret's hash only)
//   /w/commit            the commit sequence: the token of the last Txn written
//   /s/<id, 20 digits>   issue 38: the task's state name, written in the same Txn as its record
//   /w/max_id            issue 38: the largest task id ever stored (archived ones included)
//   /w/index             issue 38: "1" once every task has its /s/ key (stores of older
//                        versions get them at their first take-over)
//   /ki/<id>/<key>       issue 38: the idempotency keys naming a task (deleted with it)
//   /cluster_id          the store's cluster id (issue 39), created once, never changed
//   /r/<day, 10 digits>/<team>/<user>/<failure>
//                        issue 38: a rollup row (record_codec JSON; '%' and '/' in the names
//                        written %25 and %2F), in the Txn that deletes the tasks it counts
//
// Fencing: with a Fence, every write is one Txn guarded by the leader key's create revision
// (If CreateRevision(leader key) == fence revision Then writes). A deposed leader's write
// finds another revision (or no key) and fails with FailedPrecondition "fenced"; the store
// then refuses every later write and calls `on_fenced` once, so the server steps down.
//
// Exactly once: every Txn also compares the commit sequence key's mod revision with the one
// this store wrote last (read at Open) and puts a token of its own there. A Txn the client sent
// again after a timeout (to another member, or the same) then lands once: if an earlier
// attempt landed, the retry fails its comparison, finds its own token and reports success; if
// the retry landed first, a late earlier attempt fails its comparison and writes nothing, so an
// old batch can never overwrite a newer one. Any other token there means a write this store
// did not expect (two writers, or a Txn reported failed that landed after all): the store
// refuses further writes as when fenced, and the server steps down and restores from etcd.
//
// Atomicity (issue 38): a commit is exactly one Txn. A batch above etcd's request limits
// (max_txn_ops operations with the commit sequence's put, max_request_bytes bytes; etcd's
// defaults are 128 and 1.5 MiB) is refused with InvalidArgument and nothing is written;
// Limits() says what fits, and the control plane never builds a larger commit. A value above
// max_value_bytes is split into parts written in the same Txn as its head.
//
// Outcomes: a Txn etcd answered (success, a failed comparison, an error such as "too many
// operations") has a known outcome. A Txn that got no answer (Unavailable: a timeout, a
// connection lost after the request was sent; or an answer that could not be read: any error
// but a refusal) may have been applied, or may still be: Commit
// returns Unavailable, the store refuses every later write and calls `on_fenced`, so the
// server steps down without withdrawing anything and the next leader restores from etcd.
//
// Reads: the leader keeps an index of task id -> state (built by LoadLiveTasks from the /s/
// keys, which are a few bytes each, and kept by Commit), so counts and listings by state do not
// scan etcd; a take-over decodes the records of live tasks only (issue 38). Every
// `compact_every` commits the history older than `keep_revisions` is compacted, so etcd's
// database does not grow with the number of changes; archived tasks are deleted by ordinary
// fenced commits (WriteBatch::deleted_tasks), so their revisions are compacted the same way.
//
// Thread-safety: all methods take one internal mutex.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "store/etcd_client.h"
#include "store/state_store.h"

namespace gpusched::store {

class EtcdStore final : public StateStore {
 public:
  struct Fence {
    std::string leader_key;    // "" = unfenced (a single writer, tests)
    int64_t create_revision = 0;
  };
  struct Options {
    std::string prefix = "/gpusched";
    Fence fence;
    std::function<void(const Status&)> on_fenced;
    size_t max_txn_ops = 128;
    size_t max_request_bytes = 1'400'000;  // below etcd's default 1.5 MiB, with room to spare
    size_t max_value_bytes = 256 * 1024;
    // Issue 38: a revision is one commit of up to max_txn_ops records (~150 KB), so history is
    // kept short: nothing reads old revisions (a standby's watch starts at the revision it
    // just read). 1,000 revisions are about 150 MB at most; the soak (bench/etcd-soak) shows
    // etcd's database flat with these.
    int64_t compact_every = 200;
    int64_t keep_revisions = 1'000;
  };
  static StatusOr<std::unique_ptr<EtcdStore>> Open(std::unique_ptr<EtcdClient> client,
                                                   Options options);
  ~EtcdStore() override;

  Status Commit(const WriteBatch& batch) override;
  CommitLimits Limits() const override;
  StatusOr<LiveTasks> LoadLiveTasks() override;
  StatusOr<TaskRecord> GetTask(uint64_t id) override;
  StatusOr<TaskPage> ListTasks(std::optional<std::string> state, uint64_t after_id,
                               size_t limit) override;
  StatusOr<std::map<std::string, int64_t>> CountTasksByState() override;
  StatusOr<std::optional<uint64_t>> LookupIdempotencyKey(const std::string& key) override;
  StatusOr<std::vector<NodeRecord>> LoadNodes() override;
  StatusOr<std::vector<LearnedPeak>> LoadLearnedPeaks() override;
  StatusOr<std::vector<TokenRecord>> LoadTokens() override;
  StatusOr<std::vector<core::TeamQuota>> LoadQuotas() override;
  StatusOr<std::vector<QuarantinedRow>> LoadQuarantine() override;
  StatusOr<std::vector<RollupRow>> LoadRollups(int64_t from_day, int64_t to_day) override;
  Status SnapshotTo(const std::string&) override {
    return FailedPrecondition(
        "the state is in etcd: back up etcd itself (`etcdctl snapshot save FILE`, which is "
        "consistent and holds every committed task), not through the server");
  }

  // For tests and `status`: commits written, Txns sent, compactions done.
  struct Stats {
    int64_t commits = 0;
    int64_t txns = 0;
    int64_t compactions = 0;
    int64_t split_values = 0;
    int64_t retries_found_landed = 0;  // Txns sent again whose earlier attempt had landed
    int64_t decoded_tasks = 0;  // task records decoded by LoadLiveTasks (issue 38)
  };
  Stats stats();
  EtcdClient& client() { return *client_; }
  // Issue 39: fails once an answer came from another etcd cluster than the first one reached
  // (EtcdClient::Identity); every call through the client fails the same way from then on.
  Status Health() override { return client_->Identity(); }
  // Issue 39: the first server to open the prefix creates it (a Txn that puts it only if the
  // key was never created); every other server, and every later Open, reads that one back.
  const std::string& ClusterId() const override { return cluster_id_; }

 private:
  EtcdStore(std::unique_ptr<EtcdClient> client, Options options);
  std::string Key(const std::string& kind, const std::string& name) const;
  static std::string TaskName(uint64_t id);
  // REQUIRES: mu_ held. Every group's operations in one Txn; InvalidArgument when they do
  // not fit one (writing nothing).
  Status WriteOne(std::vector<std::vector<EtcdOp>> groups);
  // A commit's operations in groups that must land together, and which keys it writes split
  // into parts (values above max_value_bytes) or whole.
  struct CommitGroups {
    std::vector<std::vector<EtcdOp>> groups;
    std::set<std::string> now_split, now_whole;
    void Track(const std::string& key, size_t size, size_t max_value_bytes);
  };
  void AddTaskGroups(const WriteBatch& batch, CommitGroups& out);
  // Issue 38: a task's /s/ key unless it stays live (or keeps its state), and /w/max_id when
  // it is the batch's `largest` id and the largest yet.
  void AddIndexOps(std::vector<EtcdOp>& group, const TaskRecord& r, bool largest) const;
  void AddKeyOps(std::vector<EtcdOp>& group, const std::string& key, uint64_t id) const;
  Status AddDeletedTaskGroups(const WriteBatch& batch, CommitGroups& out);
  StatusOr<std::vector<EtcdRange>> KeysOf(const std::vector<uint64_t>& ids);
  // LoadLiveTasks' two ways: from the /s/ keys, or (a store without them) every record once,
  // writing the /s/ keys. REQUIRES: mu_ held.
  Status LoadFromIndex(LiveTasks& out);
  Status LoadByScan(LiveTasks& out);
  Status TakeRecord(const EtcdKv& kv, LiveTasks& out);
  Status WriteIndex();
  void Index(uint64_t id, const std::string& state);
  StatusOr<std::vector<EtcdKv>> GetTasks(const std::vector<uint64_t>& ids);
  void AddNodeGroups(const WriteBatch& batch, CommitGroups& out);
  void AddSmallGroups(const WriteBatch& batch, CommitGroups& out) const;
  void Committed(const WriteBatch& batch, const CommitGroups& written);
  Status SendTxn(std::vector<EtcdOp> ops);
  void AddPut(std::vector<EtcdOp>& ops, const std::string& key, const std::string& value);
  StatusOr<std::string> Assemble(const EtcdKv& kv);
  StatusOr<std::vector<EtcdKv>> ScanAll(const std::string& prefix);
  StatusOr<std::vector<EtcdKv>> ScanRange(const std::string& from, const std::string& end);
  // Issue 38: a rollup row's key, and the first key of a day's rows.
  std::string RollupKey(const RollupRow& row) const;
  std::string RollupDayKey(int64_t day) const;
  void MaybeCompact(int64_t revision);
  // The Txn's answer when its comparisons failed: fenced, or an earlier attempt of it landed.
  Status ExplainFailedTxn(const EtcdTxnResult& r, const std::string& token);
  // A Txn that got no answer: the status Commit returns, fencing the store when its outcome
  // is unknown.
  Status TxnNotAnswered(const Status& s);
  void Fence(Status why);
  Status LoadClusterId();
  Status MarkIndexedIfEmpty();

  std::unique_ptr<EtcdClient> client_;
  const Options options_;
  std::mutex mu_;
  bool fenced_ = false;
  Status fenced_status_ = Status::Ok();
  bool indexed_ = false;
  std::unordered_map<uint64_t, std::string> state_of_;
  std::map<std::string, std::set<uint64_t>> by_state_;
  std::set<std::string> split_keys_;  // keys whose value is stored in parts now
  std::atomic<size_t> split_count_{0};  // split_keys_.size(), for Limits() without mu_
  uint64_t max_id_ = 0;
  int64_t since_compact_ = 0;
  int64_t commit_rev_ = 0;     // mod revision of the commit sequence key as this store left it
  uint64_t txn_count_ = 0;
  std::string writer_;         // this store's part of the tokens: fence revision and a nonce
  Stats stats_;
  std::string cluster_id_;  // set by Open
};

}  // namespace gpusched::store
