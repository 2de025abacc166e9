#pragma once
// StateStore: where the control plane keeps what must survive a restart (DESIGN.md "State"):
// every task record, the nodes (with cordon/drain flags), the idempotency keys of submissions,
// what the CN109992422A memory table learned (one aggregate per profile), the API's bearer
// tokens (their hashes, never their secrets) and the team quotas.
//
// Contract: Commit is all or nothing, and has returned OK only once the batch is durable
// against a crash of the process (kill -9). On error nothing of the batch is visible, to this
// process or after a restart. The server acknowledges a submission, and sends an assignment
// or a kill, only after the Commit holding the record that explains it returned OK.
// Terminal tasks stay in the store after the server forgets them (show, logs, accounting),
// until the server archives them after history_retention (issue 38: store/task_archive.h) and
// deletes them with WriteBatch::deleted_tasks. LiveTasks::max_id stays the largest id ever
// stored after that, so ids are never handed out twice.
// Issue 38: Commit refuses a batch above Limits() (InvalidArgument naming the operations or
// bytes and the limit) and writes nothing. Unavailable from Commit means the outcome is
// unknown (the write may be durable, or become durable later): the store then refuses every
// later write and the caller must not tell anyone the batch was not stored. Any other error
// is a known failure: nothing of the batch is, or will become, visible.
// Thread-safety: implementations are safe to call from several threads.

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "core/quota.h"
#include "core/task.h"

namespace gpusched::store {

struct TaskRecord {
  core::Task task;
  // Where the task ran last; kept after core releases the placement (finished tasks).
  std::optional<core::Placement> last_placement;
};

struct NodeRecord {
  core::NodeSpec spec;
  bool cordoned = false;
  bool draining = false;
};

// What the memory table learned about one profile (CN109992422A claim 1): the last measured
// peaks (its window, oldest first) and how many were observed in all. One row per profile,
// so storage does not grow with the number of tasks. Rows of older versions (the largest
// peak ever, from unverified reports) are dropped when the store opens (issue 36).
struct LearnedPeak {
  core::MemoryProfile profile;
  std::vector<MiB> recent_mib;
  int64_t observations = 0;
};

// A bearer token of the API (server/tokens.h): who it names, and the SHA-256 of its secret
// (lower-case hex). The secret itself is never stored.
struct TokenRecord {
  std::string id;  // the public part of the token, unique
  std::string user;
  std::string team;
  bool admin = false;
  int64_t created_ms = 0;   // wall clock, ms since the epoch
  std::string secret_sha256;
  // Issue 35: set for an agent token, the node name it may register as (user is then
  // "agent:NODE", which no API caller can be). "" for a user's token.
  std::string agent_node = {};
};

// Issue 38: what the archived tasks of one UTC day used, per (team, user, failure), hour by
// hour, so that `acct` reads history from rows that grow with days and owners, not with tasks.
// Written only in the commit that deletes the tasks counted in it (ControlPlane::ArchiveHistory),
// so a task is either in the store or in the rows, never in both.
struct RollupSlot {
  // GPU use in micro-GPU-milliseconds: a task's GPU share (m/t of each GPU, 1 for a whole GPU)
  // x milliseconds x 10^6, rounded per task and hour. Integers, so that sums do not depend on
  // the order they are made in (one GPU for a whole hour: 3.6e12; int64 holds 2.5 million of
  // those per slot).
  int64_t gpu_micro_ms = 0;
  int64_t gpu_mem_mib_ms = 0;  // GPU memory reserved: MiB x milliseconds
  int64_t tasks = 0;           // tasks whose last run ended in this hour
  bool operator==(const RollupSlot&) const = default;
};
struct RollupRow {
  static constexpr int kHours = 24;
  int64_t day = 0;  // UTC days since the epoch (ms / 86,400,000); >= 0
  // As accounting names them (server/accounting.h TaskOwner: "default" for a task that
  // records none) and the task's failure name, "none" for one that did not fail.
  std::string team, user, failure;
  std::array<RollupSlot, kHours> hours{};  // hour h: [day + h hours, day + h + 1 hours)
  bool operator==(const RollupRow&) const = default;
  // The row's identity, and its order in LoadRollups.
  auto Key() const { return std::tie(day, team, user, failure); }
};

// One atomic write.
struct WriteBatch {
  std::vector<TaskRecord> tasks;                     // insert or replace
  std::vector<NodeRecord> nodes;                     // insert or replace
  std::vector<std::string> removed_nodes;            // node names to delete (absent: no-op)
  std::map<std::string, uint64_t> idempotency_keys;  // key -> task id; insert only
  std::vector<LearnedPeak> peaks;                    // insert or replace the aggregate
  std::vector<core::MemoryProfile> forgotten_peaks;  // aggregates to delete (absent: no-op)
  std::vector<TokenRecord> tokens;                   // insert or replace
  std::vector<std::string> revoked_tokens;           // token ids to delete (absent: no-op)
  std::vector<core::TeamQuota> quotas;               // insert or replace, by team
  std::vector<std::string> removed_quotas;           // teams to delete (absent: no-op)
  // Issue 38: finished tasks archived after history_retention, deleted with their record and
  // the idempotency keys naming them (absent: no-op). EtcdStore deletes the keys stored with
  // a task since issue 38 (it keeps which keys name a task beside them).
  std::vector<uint64_t> deleted_tasks;
  // Issue 38: rollup rows, inserted or replaced whole, by (day, team, user, failure).
  std::vector<RollupRow> rollups;
  bool empty() const {
    return tasks.empty() && nodes.empty() && removed_nodes.empty() && idempotency_keys.empty() &&
           peaks.empty() && forgotten_peaks.empty() && tokens.empty() && revoked_tokens.empty() &&
           quotas.empty() && removed_quotas.empty() && deleted_tasks.empty() &&
           rollups.empty();
  }
};

// Issue 38: what one Commit may carry. A batch costs one operation per record written or
// deleted (task, node, idempotency key, learned peak, token, quota, rollup row; a removed node
// two), one
// more per part of a value above value_part_bytes, and in bytes the sum over its operations
// of the record's name (a task's 20-digit id, a node's name, a key, ...), its value and
// op_overhead_bytes. The defaults: no limit.
struct CommitLimits {
  size_t max_ops = std::numeric_limits<size_t>::max();
  size_t max_bytes = std::numeric_limits<size_t>::max();
  size_t value_part_bytes = std::numeric_limits<size_t>::max();
  size_t op_overhead_bytes = 0;
  // Index entries a store writes beside each record put, in the same commit (EtcdStore: a
  // task's /s/<id> state, a key's /ki/<id>/<key>), each of at most index_value_bytes.
  size_t index_ops_per_put = 0;
  size_t index_value_bytes = 0;
};

// An estimate of a batch's cost against CommitLimits, added up record by record from upper
// bounds of the values' sizes (record_codec.h EncodedTaskBound), so never below the cost.
struct CommitCost {
  size_t ops = 0;
  size_t bytes = 0;
  // A record of `name_bytes` of name and at most `value_bytes` of value written.
  void Put(size_t name_bytes, size_t value_bytes, const CommitLimits& limits) {
    const size_t part = limits.value_part_bytes;
    const size_t parts = value_bytes > part ? (value_bytes + part - 1) / part : 0;
    ops += 1 + parts + limits.index_ops_per_put;
    bytes += value_bytes + (1 + parts) * (name_bytes + limits.op_overhead_bytes) +
             limits.index_ops_per_put *
                 (2 * name_bytes + limits.op_overhead_bytes + limits.index_value_bytes);
  }
  // Issue 38: a record without index entries (a rollup row, never split: a few KiB at most).
  void PutUnindexed(size_t name_bytes, size_t value_bytes, const CommitLimits& limits) {
    ops += 1;
    bytes += name_bytes + value_bytes + limits.op_overhead_bytes;
  }
  // A record of `name_bytes` of name (and any parts of it) deleted.
  void Delete(size_t name_bytes, const CommitLimits& limits) {
    ops += 1;
    bytes += 2 * (name_bytes + limits.op_overhead_bytes);  // a key and a range's end
  }
  CommitCost& operator+=(const CommitCost& o) {
    ops += o.ops;
    bytes += o.bytes;
    return *this;
  }
  bool Within(const CommitLimits& limits) const {
    return ops <= limits.max_ops && bytes <= limits.max_bytes;
  }
};

// A row that could not be decoded, moved aside so the rest can be served.
struct QuarantinedRow {
  std::string table;  // "tasks" or "nodes"
  std::string key;    // task id or node name
  std::string error;  // what the decoder said
};

struct LiveTasks {
  std::vector<TaskRecord> tasks;  // every non-terminal task, ascending id
  uint64_t max_id = 0;            // the largest task id ever stored (terminal ones included)
  std::vector<QuarantinedRow> quarantined;
};

struct TaskPage {
  std::vector<TaskRecord> tasks;  // ascending id
  uint64_t next_after_id = 0;     // 0 = no further page
};

class StateStore {
 public:
  virtual ~StateStore() = default;
  virtual Status Commit(const WriteBatch& batch) = 0;
  // Issue 38: what one Commit may carry (see CommitLimits); fixed once the store is open,
  // except that EtcdStore lowers max_ops by the values it keeps in parts. Default: unlimited.
  virtual CommitLimits Limits() const { return {}; }

  // For a restart: the tasks still to run or running. Rows that do not decode are moved to a
  // quarantine (logged by the caller), never fatal.
  virtual StatusOr<LiveTasks> LoadLiveTasks() = 0;
  // One task; NotFound when absent.
  virtual StatusOr<TaskRecord> GetTask(uint64_t id) = 0;
  // Tasks with id > after_id, optionally only in `state` (core::TaskStateName), from an index.
  virtual StatusOr<TaskPage> ListTasks(std::optional<std::string> state, uint64_t after_id,
                                       size_t limit) = 0;
  // Number of stored tasks by state name.
  virtual StatusOr<std::map<std::string, int64_t>> CountTasksByState() = 0;
  virtual StatusOr<std::optional<uint64_t>> LookupIdempotencyKey(const std::string& key) = 0;

  virtual StatusOr<std::vector<NodeRecord>> LoadNodes() = 0;  // ascending name
  virtual StatusOr<std::vector<LearnedPeak>> LoadLearnedPeaks() = 0;
  virtual StatusOr<std::vector<TokenRecord>> LoadTokens() = 0;  // ascending id
  virtual StatusOr<std::vector<core::TeamQuota>> LoadQuotas() = 0;  // ascending team
  virtual StatusOr<std::vector<QuarantinedRow>> LoadQuarantine() = 0;
  // Issue 38: the rollup rows with from_day <= day < to_day, ordered by (day, team, user,
  // failure). A row that does not decode is logged and left out.
  virtual StatusOr<std::vector<RollupRow>> LoadRollups(int64_t from_day, int64_t to_day) = 0;

  // Writes a consistent snapshot of everything stored to `path`, a new file (`gpusched admin
  // backup`, issue 39): every commit that returned before the call is in it, none is half in
  // it. FailedPrecondition where this store cannot (the state is in memory, or in etcd, whose
  // own snapshot is the backup), naming why.
  // Issue 39: Ok while this store can take writes; otherwise why not (FailedPrecondition,
  // naming what happened and what to do), e.g. SQLite's file was removed or replaced under
  // the server. Checked afresh on each call (SqliteStore: one stat(2)); every Commit checks
  // it too and fails with the same status.
  virtual Status Health() { return Status::Ok(); }

  // Issue 39: this store's cluster id (base/cluster_id.h), made when the store was created
  // and the same for its whole life: after a reopen, and for every server of an HA group.
  // A new store is a new cluster. Fixed once Open returned.
  virtual const std::string& ClusterId() const = 0;

  virtual Status SnapshotTo(const std::string& path) {
    (void)path;
    return FailedPrecondition("this store cannot be backed up");
  }
};

}  // namespace gpusched::store
