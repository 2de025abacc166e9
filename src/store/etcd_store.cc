#include "store/etcd_store.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <random>
#include <utility>
#include <nlohmann/json.hpp>

#include "base/cluster_id.h"
#include "base/log.h"
#include "store/record_codec.h"

namespace gpusched::store {

using Json = nlohmann::json;

namespace {

// A value stored in parts has this head; records are JSON, so never start with a NUL byte.
constexpr char kPartsMark[] = "\0gpusched-parts:";
constexpr size_t kPartsMarkLen = sizeof(kPartsMark) - 1;
constexpr size_t kScanPage = 1'000;

bool IsLive(const std::string& state) {
  return state == "pending" || state == "assigned" || state == "running";
}

// A task key's id (20 digits); 0 when it is not one.
uint64_t ParseId(const std::string& name) {
  try {
    return std::stoull(name);
  } catch (const std::exception&) {
    return 0;
  }
}

size_t OpBytes(const EtcdOp& op) {
  // Its bytes in etcd's protobuf request (raw bytes, issue 38), plus the tags and lengths of
  // the RequestOp around them (under 32 bytes).
  return op.key.size() + op.value.size() + op.range_end.size() + 32;
}

}  // namespace

StatusOr<std::unique_ptr<EtcdStore>> EtcdStore::Open(std::unique_ptr<EtcdClient> client,
                                                     Options options) {
  if (client == nullptr) return InvalidArgument("etcd store: no client");
  if (options.prefix.empty() || options.prefix.back() == '/') {
    return InvalidArgument("etcd store: prefix \"" + options.prefix +
                           "\" must be non-empty and not end with '/'");
  }
  if (options.max_txn_ops < 4) return InvalidArgument("etcd store: max_txn_ops must be >= 4");
  if (options.max_value_bytes < 1024 || options.max_value_bytes * 2 > options.max_request_bytes) {
    return InvalidArgument("etcd store: max_value_bytes must be >= 1 KiB and at most half of "
                           "max_request_bytes");
  }
  // One read proves the cluster answers (it has a quorum: reads are linearizable) and finds
  // where the commit sequence stands.
  GS_ASSIGN_OR_RETURN(EtcdRange seq, client->Range(options.prefix + "/w/commit"));
  std::unique_ptr<EtcdStore> s(new EtcdStore(std::move(client), std::move(options)));
  s->commit_rev_ = seq.kvs.empty() ? 0 : seq.kvs[0].mod_revision;
  GS_ASSIGN_OR_RETURN(EtcdRange max_id, s->client_->Range(s->Key("w", "max_id")));
  if (!max_id.kvs.empty()) {
    try {
      s->max_id_ = std::stoull(max_id.kvs[0].value);
    } catch (const std::exception&) {
      return DataLoss("etcd store: " + max_id.kvs[0].key + " holds \"" + max_id.kvs[0].value +
                      "\", not a task id");
    }
  }
  GS_RETURN_IF_ERROR(s->LoadClusterId());
  GS_RETURN_IF_ERROR(s->MarkIndexedIfEmpty());
  return s;
}

// Issue 38: a store without tasks yet is indexed from its first commit on (every commit writes
// the /s/ keys), so its first take-over reads the index. Compare-and-create, like the cluster id.
Status EtcdStore::MarkIndexedIfEmpty() {
  const std::string marker = Key("w", "index");
  GS_ASSIGN_OR_RETURN(EtcdRange marked, client_->Range(marker));
  if (!marked.kvs.empty()) return Status::Ok();
  const std::string tasks = options_.prefix + "/t/";
  GS_ASSIGN_OR_RETURN(EtcdRange any, client_->Range(tasks, EtcdClient::PrefixEnd(tasks), 1));
  if (!any.kvs.empty()) return Status::Ok();  // written before the index: LoadByScan
  EtcdCompare never_created;
  never_created.key = marker;
  never_created.target = EtcdCompare::Target::kCreateRevision;
  never_created.number = 0;
  return client_->Txn({never_created}, {EtcdOp::Put(marker, "1")}).status();
}

// Compare-and-create: of servers opening a new prefix at once, one Txn creates the key and
// the others read it. Not fenced and outside the commit sequence: the value never changes,
// so whoever writes it first is right, leader or not. A retried Txn whose first attempt
// landed reads its own id back.
Status EtcdStore::LoadClusterId() {
  GS_ASSIGN_OR_RETURN(const std::string fresh, NewClusterId());
  const std::string key = options_.prefix + "/cluster_id";
  EtcdCompare never_created;
  never_created.key = key;
  never_created.target = EtcdCompare::Target::kCreateRevision;
  never_created.number = 0;
  GS_ASSIGN_OR_RETURN(EtcdTxnResult r, client_->Txn({never_created}, {EtcdOp::Put(key, fresh)},
                                                    {EtcdOp::Get(key)}));
  if (r.succeeded) {
    cluster_id_ = fresh;
  } else if (r.ranges.size() == 1 && r.ranges[0].kvs.size() == 1) {
    cluster_id_ = r.ranges[0].kvs[0].value;
  } else {
    return Internal("etcd store: " + key + " exists but could not be read back");
  }
  return ValidateClusterId(cluster_id_, "etcd store: " + key);
}

EtcdStore::EtcdStore(std::unique_ptr<EtcdClient> client, Options options)
    : client_(std::move(client)), options_(std::move(options)) {
  std::random_device rd;
  char nonce[17];
  std::snprintf(nonce, sizeof nonce, "%08x%08x", rd(), rd());
  writer_ = std::to_string(options_.fence.create_revision) + "-" + nonce;
}

EtcdStore::~EtcdStore() = default;

std::string EtcdStore::Key(const std::string& kind, const std::string& name) const {
  return options_.prefix + "/" + kind + "/" + name;
}

std::string EtcdStore::TaskName(uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%020" PRIu64, id);
  return buf;
}

EtcdStore::Stats EtcdStore::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void EtcdStore::AddPut(std::vector<EtcdOp>& ops, const std::string& key,
                       const std::string& value) {
  const std::string parts_prefix = options_.prefix + "/x/" + key.substr(options_.prefix.size() + 1) + "/";
  if (split_keys_.count(key) != 0) {
    // The previous value was in parts: drop them (the new one may be smaller).
    ops.push_back(EtcdOp::Delete(parts_prefix, EtcdClient::PrefixEnd(parts_prefix)));
  }
  if (value.size() <= options_.max_value_bytes) {
    ops.push_back(EtcdOp::Put(key, value));
    return;
  }
  const size_t n = (value.size() + options_.max_value_bytes - 1) / options_.max_value_bytes;
  ops.push_back(EtcdOp::Put(key, std::string(kPartsMark, kPartsMarkLen) + std::to_string(n)));
  for (size_t i = 0; i < n; ++i) {
    char idx[24];
    std::snprintf(idx, sizeof idx, "%08zu", i);
    ops.push_back(EtcdOp::Put(parts_prefix + idx,
                              value.substr(i * options_.max_value_bytes, options_.max_value_bytes)));
  }
}

Status EtcdStore::SendTxn(std::vector<EtcdOp> ops) {
  std::vector<EtcdCompare> guard;
  std::vector<EtcdOp> otherwise;
  if (!options_.fence.leader_key.empty()) {
    EtcdCompare c;
    c.key = options_.fence.leader_key;
    c.target = EtcdCompare::Target::kCreateRevision;
    c.number = options_.fence.create_revision;
    guard.push_back(std::move(c));
    otherwise.push_back(EtcdOp::Get(options_.fence.leader_key));
  }
  const std::string seq_key = Key("w", "commit");
  const std::string token = writer_ + "-" + std::to_string(++txn_count_);
  EtcdCompare seq;
  seq.key = seq_key;
  seq.target = EtcdCompare::Target::kModRevision;
  seq.number = commit_rev_;
  guard.push_back(std::move(seq));
  ops.push_back(EtcdOp::Put(seq_key, token));
  otherwise.push_back(EtcdOp::Get(seq_key));
  StatusOr<EtcdTxnResult> answer = client_->Txn(guard, ops, otherwise);
  ++stats_.txns;
  if (!answer.ok()) return TxnNotAnswered(answer.status());
  const EtcdTxnResult& r = *answer;
  if (!r.succeeded) {
    GS_RETURN_IF_ERROR(ExplainFailedTxn(r, token));
    ++stats_.retries_found_landed;
  } else {
    commit_rev_ = r.revision;
  }
  MaybeCompact(r.revision);
  return Status::Ok();
}

Status EtcdStore::ExplainFailedTxn(const EtcdTxnResult& r, const std::string& token) {
  const bool fenced = !options_.fence.leader_key.empty();
  if (r.ranges.size() != (fenced ? 2u : 1u)) {
    return Internal("etcd store: a failed Txn answered " + std::to_string(r.ranges.size()) +
                    " reads, not " + (fenced ? "2" : "1"));
  }
  if (fenced) {
    const EtcdRange& leader = r.ranges[0];
    if (leader.kvs.empty() || leader.kvs[0].create_revision != options_.fence.create_revision) {
      Fence(FailedPrecondition(
          "fenced: this server is no longer the leader (leader key " + options_.fence.leader_key +
          " was not created at revision " + std::to_string(options_.fence.create_revision) +
          "); nothing was written"));
      return fenced_status_;
    }
  }
  const EtcdRange& seq = r.ranges.back();
  if (!seq.kvs.empty() && seq.kvs[0].value == token) {
    // An earlier attempt of this very Txn landed (its answer was lost or late).
    commit_rev_ = seq.kvs[0].mod_revision;
    return Status::Ok();
  }
  Fence(FailedPrecondition(
      "etcd store: the commit sequence moved under this writer (expected revision " +
      std::to_string(commit_rev_) + ", found " +
      (seq.kvs.empty() ? std::string("no key") : "\"" + seq.kvs[0].value + "\" at revision " +
                                                   std::to_string(seq.kvs[0].mod_revision)) +
      "): another writer, or a write reported failed that landed later; stepping down to "
      "restore from etcd"));
  return fenced_status_;
}

// Issue 38: only etcd's "no" (a refused request: invalid, too large, not permitted, another
// cluster's answer) says nothing was written. Anything else (Unavailable: a timeout, a
// connection lost, etcd's own "request timed out"; an answer that could not be read) says
// nothing of whether the Txn was applied, or will be: it may land later. Nothing may be
// withdrawn on the strength of it; the store refuses later writes and the leader steps down,
// so the next one restores from what etcd holds.
Status EtcdStore::TxnNotAnswered(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kResourceExhausted:
    case StatusCode::kPermissionDenied:
    case StatusCode::kUnauthenticated:
      return s;  // refused: nothing written
    default:
      break;
  }
  Fence(FailedPrecondition(
      "etcd store: refusing writes after a commit whose outcome is unknown (" + s.message() +
      "); stepping down so that the next leader restores from etcd"));
  return Unavailable("etcd store: the outcome of the commit is unknown (" + s.message() +
                     "): it may be stored; this server steps down and the next leader "
                     "restores from etcd");
}

void EtcdStore::Fence(Status why) {
  fenced_ = true;
  fenced_status_ = std::move(why);
  logging::Error("store", fenced_status_.message());
  if (options_.on_fenced) options_.on_fenced(fenced_status_);
}

void EtcdStore::MaybeCompact(int64_t revision) {
  if (options_.compact_every <= 0 || ++since_compact_ < options_.compact_every) return;
  since_compact_ = 0;
  const int64_t target = revision - options_.keep_revisions;
  if (target <= 0) return;
  if (Status s = client_->Compact(target); !s.ok()) {
    logging::Warn("store", "etcd compaction to revision " + std::to_string(target) +
                               " failed (retried later): " + s.message());
    return;
  }
  ++stats_.compactions;
}

CommitLimits EtcdStore::Limits() const {
  CommitLimits l;
  // One operation is the commit sequence's put; a put of a value kept in parts now also
  // deletes the old parts, which an estimate cannot know: one operation kept for each.
  // One more is /w/max_id, which a commit of new tasks writes once.
  const size_t reserve = 2 + split_count_.load(std::memory_order_relaxed);
  l.max_ops = options_.max_txn_ops > reserve + 1 ? options_.max_txn_ops - reserve : 1;
  // OpBytes: the bytes plus 32 per operation; the comparisons and the commit sequence's put
  // take the last KiB.
  l.max_bytes = options_.max_request_bytes - 1024;
  l.value_part_bytes = options_.max_value_bytes;
  l.op_overhead_bytes = options_.prefix.size() + 96;  // "/t/", a part's "/x/t/.../NNNNNNNN"
  // Issue 38: a task's state under /s/<id>, a key's entry under /ki/<id>/<key>: one each.
  l.index_ops_per_put = 1;
  l.index_value_bytes = 32;
  return l;
}

// Issue 38: the whole batch in one Txn, or nothing.
Status EtcdStore::WriteOne(std::vector<std::vector<EtcdOp>> groups) {
  std::vector<EtcdOp> txn;
  size_t bytes = 0;
  for (auto& g : groups) {
    for (EtcdOp& op : g) {
      bytes += OpBytes(op);
      txn.push_back(std::move(op));
    }
  }
  const size_t max_ops = options_.max_txn_ops - 1;  // one is the commit sequence's put
  if (txn.size() > max_ops || bytes > options_.max_request_bytes) {
    return InvalidArgument(
        "etcd store: a commit of " + std::to_string(txn.size()) + " operations and " +
        std::to_string(bytes) + " bytes does not fit one etcd transaction (at most " +
        std::to_string(max_ops) + " operations, max_txn_ops " +
        std::to_string(options_.max_txn_ops) + " less the commit sequence's, and " +
        std::to_string(options_.max_request_bytes) + " bytes, max_request_bytes); nothing "
        "was written");
  }
  if (txn.empty()) return Status::Ok();
  return SendTxn(std::move(txn));
}

void EtcdStore::CommitGroups::Track(const std::string& key, size_t size, size_t max_value_bytes) {
  (size > max_value_bytes ? now_split : now_whole).insert(key);
}

// A task with its idempotency keys; the keys of tasks not in the batch on their own.
void EtcdStore::AddTaskGroups(const WriteBatch& batch, CommitGroups& out) {
  std::map<uint64_t, std::vector<std::string>> keys_of;
  for (const auto& [key, id] : batch.idempotency_keys) keys_of[id].push_back(key);
  uint64_t batch_max = 0;  // /w/max_id rides with this one (a key once per Txn)
  for (const TaskRecord& r : batch.tasks) batch_max = std::max(batch_max, r.task.id.value());
  for (const TaskRecord& r : batch.tasks) {
    std::vector<EtcdOp> g;
    const std::string key = Key("t", TaskName(r.task.id.value()));
    const std::string value = EncodeTask(r);
    AddPut(g, key, value);
    out.Track(key, value.size(), options_.max_value_bytes);
    AddIndexOps(g, r, r.task.id.value() == batch_max);
    if (auto it = keys_of.find(r.task.id.value()); it != keys_of.end()) {
      for (const std::string& k : it->second) AddKeyOps(g, k, r.task.id.value());
      keys_of.erase(it);
    }
    out.groups.push_back(std::move(g));
  }
  for (const auto& [id, keys] : keys_of) {
    std::vector<EtcdOp> g;
    for (const std::string& k : keys) AddKeyOps(g, k, id);
    out.groups.push_back(std::move(g));
  }
}

void EtcdStore::AddIndexOps(std::vector<EtcdOp>& group, const TaskRecord& r,
                            bool largest) const {
  const uint64_t id = r.task.id.value();
  const std::string state = core::TaskStateName(r.task.state);
  // The index tells a take-over which tasks are live, and holds a finished task's state for
  // listing; a live task's exact state is read from its record at the take-over. So a move
  // between live states (pending -> assigned -> running) leaves the key alone: two writes
  // fewer a task, which etcd would otherwise have to compact.
  const auto known = state_of_.find(id);
  const bool same = known != state_of_.end() &&
                    (known->second == state || (IsLive(known->second) && IsLive(state)));
  if (!same) group.push_back(EtcdOp::Put(Key("s", TaskName(id)), state));
  if (largest && id > max_id_) group.push_back(EtcdOp::Put(Key("w", "max_id"), std::to_string(id)));
}

// An idempotency key, and (issue 38) which keys name the task beside it, so that they go with
// the task when it is archived.
void EtcdStore::AddKeyOps(std::vector<EtcdOp>& group, const std::string& key, uint64_t id) const {
  group.push_back(EtcdOp::Put(Key("k", key), std::to_string(id)));
  group.push_back(EtcdOp::Put(Key("ki", TaskName(id) + "/" + key), ""));
}

// Issue 38: an archived task's record, its /s/ key and its idempotency keys (four operations
// for a task with one key: a commit of 30 fits etcd's default 128), and its parts where this
// store saw it in parts (the server's archiver reads every record it deletes). The keys are
// found by reads before the write (KeysOf).
Status EtcdStore::AddDeletedTaskGroups(const WriteBatch& batch, CommitGroups& out) {
  if (batch.deleted_tasks.empty()) return Status::Ok();
  GS_ASSIGN_OR_RETURN(const std::vector<EtcdRange> keys_of, KeysOf(batch.deleted_tasks));
  for (size_t i = 0; i < batch.deleted_tasks.size(); ++i) {
    const std::string name = TaskName(batch.deleted_tasks[i]);
    const std::string key = Key("t", name), keys = Key("ki", name + "/");
    std::vector<EtcdOp> g = {EtcdOp::Delete(key), EtcdOp::Delete(Key("s", name))};
    if (!keys_of[i].kvs.empty()) g.push_back(EtcdOp::Delete(keys, EtcdClient::PrefixEnd(keys)));
    for (const EtcdKv& kv : keys_of[i].kvs) {
      g.push_back(EtcdOp::Delete(Key("k", kv.key.substr(keys.size()))));
    }
    if (split_keys_.count(key) != 0) {
      const std::string parts = options_.prefix + "/x/t/" + name + "/";
      g.push_back(EtcdOp::Delete(parts, EtcdClient::PrefixEnd(parts)));
    }
    out.groups.push_back(std::move(g));
    out.now_whole.insert(key);
  }
  return Status::Ok();
}

// The /ki/ entries of each of `ids`, in order: Txns of reads, 64 to a Txn.
StatusOr<std::vector<EtcdRange>> EtcdStore::KeysOf(const std::vector<uint64_t>& ids) {
  std::vector<EtcdRange> out;
  constexpr size_t kChunk = 64;
  for (size_t i = 0; i < ids.size(); i += kChunk) {
    std::vector<EtcdOp> reads;
    for (size_t j = i; j < std::min(ids.size(), i + kChunk); ++j) {
      const std::string keys = Key("ki", TaskName(ids[j]) + "/");
      reads.push_back(EtcdOp::Get(keys, EtcdClient::PrefixEnd(keys)));
    }
    GS_ASSIGN_OR_RETURN(EtcdTxnResult found, client_->Txn({}, reads));
    if (found.ranges.size() != reads.size()) {
      return Internal("etcd store: the keys of archived tasks: " +
                      std::to_string(found.ranges.size()) + " answers to " +
                      std::to_string(reads.size()) + " reads");
    }
    for (EtcdRange& r : found.ranges) out.push_back(std::move(r));
  }
  return out;
}

// Each node, and each removed node (`node rm`: the record and any parts).
void EtcdStore::AddNodeGroups(const WriteBatch& batch, CommitGroups& out) {
  for (const NodeRecord& n : batch.nodes) {
    std::vector<EtcdOp> g;
    const std::string key = Key("n", n.spec.name);
    const std::string value = EncodeNode(n);
    AddPut(g, key, value);
    out.Track(key, value.size(), options_.max_value_bytes);
    out.groups.push_back(std::move(g));
  }
  for (const std::string& name : batch.removed_nodes) {
    const std::string key = Key("n", name);
    const std::string parts = options_.prefix + "/x/" + key.substr(options_.prefix.size() + 1) + "/";
    out.groups.push_back({EtcdOp::Delete(key), EtcdOp::Delete(parts, EtcdClient::PrefixEnd(parts))});
    out.now_whole.insert(key);
  }
}

// Learned peaks, tokens and quotas: one operation each.
void EtcdStore::AddSmallGroups(const WriteBatch& batch, CommitGroups& out) const {
  for (const LearnedPeak& p : batch.peaks) {
    const std::string profile = EncodeProfile(p.profile);
    Json v = {{"profile", profile}, {"recent_mib", p.recent_mib},
              {"observations", p.observations}};
    out.groups.push_back({EtcdOp::Put(Key("p", profile), v.dump())});
  }
  for (const core::MemoryProfile& p : batch.forgotten_peaks) {
    out.groups.push_back({EtcdOp::Delete(Key("p", EncodeProfile(p)))});
  }
  for (const TokenRecord& t : batch.tokens) {
    out.groups.push_back({EtcdOp::Put(Key("a", t.id), EncodeToken(t))});
  }
  for (const std::string& id : batch.revoked_tokens) {
    out.groups.push_back({EtcdOp::Delete(Key("a", id))});
  }
  for (const core::TeamQuota& q : batch.quotas) {
    Json v = {{"team", q.team},
              {"guaranteed_gpus", q.guaranteed_gpus},
              {"guaranteed_gpu_mem_mib", q.guaranteed_gpu_mem_mib},
              {"borrow_gpus", q.borrow_gpus},
              {"max_priority", q.max_priority}};
    out.groups.push_back({EtcdOp::Put(Key("quota", q.team), v.dump())});
  }
  for (const std::string& team : batch.removed_quotas) {
    out.groups.push_back({EtcdOp::Delete(Key("quota", team))});
  }
  // Issue 38: a row is a few KiB at most (72 numbers and three names), never split.
  for (const RollupRow& row : batch.rollups) {
    out.groups.push_back({EtcdOp::Put(RollupKey(row), EncodeRollup(row))});
  }
}

namespace {

// A name as one segment of a key: '%' and '/' written %25 and %2F, so that no name can end
// a segment early and two rows never share a key.
std::string KeySegment(const std::string& name) {
  std::string out;
  for (const char c : name) {
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EtcdStore::RollupDayKey(int64_t day) const {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%010" PRId64, std::max<int64_t>(day, 0));
  return Key("r", buf) + "/";
}

std::string EtcdStore::RollupKey(const RollupRow& row) const {
  return RollupDayKey(row.day) + KeySegment(row.team) + "/" + KeySegment(row.user) + "/" +
         KeySegment(row.failure);
}

// What a stored batch changes in memory: the split keys, the highest id, the state index.
void EtcdStore::Committed(const WriteBatch& batch, const CommitGroups& written) {
  ++stats_.commits;
  for (const std::string& k : written.now_split) {
    split_keys_.insert(k);
    ++stats_.split_values;
  }
  for (const std::string& k : written.now_whole) split_keys_.erase(k);
  split_count_.store(split_keys_.size(), std::memory_order_relaxed);
  for (const TaskRecord& r : batch.tasks) {
    const uint64_t id = r.task.id.value();
    max_id_ = std::max(max_id_, id);
    if (indexed_) Index(id, core::TaskStateName(r.task.state));
  }
  for (uint64_t id : batch.deleted_tasks) {
    auto it = state_of_.find(id);
    if (it == state_of_.end()) continue;
    by_state_[it->second].erase(id);
    state_of_.erase(it);
  }
}

void EtcdStore::Index(uint64_t id, const std::string& state) {
  auto it = state_of_.find(id);
  if (it != state_of_.end()) by_state_[it->second].erase(id);
  state_of_[id] = state;
  by_state_[state].insert(id);
}

Status EtcdStore::Commit(const WriteBatch& batch) {
  if (batch.empty()) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  if (fenced_) return fenced_status_;
  // Groups that must land together: a task with its idempotency keys; each node; each peak.
  CommitGroups groups;
  AddTaskGroups(batch, groups);
  AddNodeGroups(batch, groups);
  AddSmallGroups(batch, groups);
  GS_RETURN_IF_ERROR(AddDeletedTaskGroups(batch, groups));
  GS_RETURN_IF_ERROR(WriteOne(std::move(groups.groups)));
  Committed(batch, groups);
  return Status::Ok();
}

StatusOr<std::string> EtcdStore::Assemble(const EtcdKv& kv) {
  if (kv.value.size() < kPartsMarkLen || kv.value.compare(0, kPartsMarkLen, kPartsMark, kPartsMarkLen) != 0) {
    return kv.value;
  }
  split_keys_.insert(kv.key);
  split_count_.store(split_keys_.size(), std::memory_order_relaxed);
  size_t n = 0;
  try {
    n = std::stoul(kv.value.substr(kPartsMarkLen));
  } catch (const std::exception&) {
    return DataLoss("etcd store: " + kv.key + ": bad parts header");
  }
  const std::string parts_prefix = options_.prefix + "/x/" + kv.key.substr(options_.prefix.size() + 1) + "/";
  GS_ASSIGN_OR_RETURN(EtcdRange parts, client_->Range(parts_prefix, EtcdClient::PrefixEnd(parts_prefix)));
  if (parts.kvs.size() != n) {
    return DataLoss("etcd store: " + kv.key + ": " + std::to_string(parts.kvs.size()) + " of " +
                    std::to_string(n) + " parts found");
  }
  std::string value;
  for (const EtcdKv& p : parts.kvs) value += p.value;
  return value;
}

StatusOr<std::vector<EtcdKv>> EtcdStore::ScanAll(const std::string& prefix) {
  return ScanRange(prefix, EtcdClient::PrefixEnd(prefix));
}

StatusOr<std::vector<EtcdKv>> EtcdStore::ScanRange(const std::string& first,
                                                   const std::string& end) {
  std::vector<EtcdKv> out;
  std::string from = first;
  for (;;) {
    GS_ASSIGN_OR_RETURN(EtcdRange r, client_->Range(from, end, kScanPage));
    for (EtcdKv& kv : r.kvs) out.push_back(std::move(kv));
    if (!r.more || out.empty()) break;
    from = out.back().key + std::string(1, '\0');
  }
  return out;
}

StatusOr<LiveTasks> EtcdStore::LoadLiveTasks() {
  std::lock_guard<std::mutex> lock(mu_);
  LiveTasks out;
  state_of_.clear();
  by_state_.clear();
  GS_ASSIGN_OR_RETURN(EtcdRange marker, client_->Range(Key("w", "index")));
  GS_RETURN_IF_ERROR(marker.kvs.empty() ? LoadByScan(out) : LoadFromIndex(out));
  indexed_ = true;
  out.max_id = max_id_;
  return out;
}

// One stored record at take-over: indexed, kept when live, quarantined when it does not decode.
Status EtcdStore::TakeRecord(const EtcdKv& kv, LiveTasks& out) {
  const std::string name = kv.key.substr(options_.prefix.size() + 3);
  const uint64_t id = ParseId(name);
  max_id_ = std::max(max_id_, id);
  ++stats_.decoded_tasks;
  auto text = Assemble(kv);
  StatusOr<TaskRecord> rec = text.ok() ? DecodeTask(*text) : StatusOr<TaskRecord>(text.status());
  if (!rec.ok() || id == 0 || rec->task.id.value() != id) {
    const std::string error = !rec.ok() ? rec.status().message() : "id does not match its key";
    Json q = {{"record", text.ok() ? *text : kv.value}, {"error", error}};
    GS_RETURN_IF_ERROR(SendTxn({EtcdOp::Put(Key("q", "tasks/" + name), q.dump()),
                                EtcdOp::Delete(kv.key), EtcdOp::Delete(Key("s", name))}));
    if (auto it = state_of_.find(id); it != state_of_.end()) {
      by_state_[it->second].erase(id);
      state_of_.erase(it);
    }
    out.quarantined.push_back({"tasks", name, error});
    return Status::Ok();
  }
  const std::string state = core::TaskStateName(rec->task.state);
  Index(id, state);
  if (IsLive(state)) out.tasks.push_back(std::move(rec).value());
  return Status::Ok();
}

// Issue 38: the state index (a few bytes a task), then the records of the live tasks only.
Status EtcdStore::LoadFromIndex(LiveTasks& out) {
  GS_ASSIGN_OR_RETURN(std::vector<EtcdKv> rows, ScanAll(options_.prefix + "/s/"));
  std::vector<uint64_t> live;
  for (const EtcdKv& kv : rows) {
    const uint64_t id = ParseId(kv.key.substr(options_.prefix.size() + 3));
    if (id == 0) continue;
    max_id_ = std::max(max_id_, id);
    Index(id, kv.value);
    if (IsLive(kv.value)) live.push_back(id);
  }
  GS_ASSIGN_OR_RETURN(std::vector<EtcdKv> records, GetTasks(live));
  for (const EtcdKv& kv : records) GS_RETURN_IF_ERROR(TakeRecord(kv, out));
  return Status::Ok();
}

// A store of a version before issue 38: every record once, then the index is written so the
// next take-over reads it instead.
Status EtcdStore::LoadByScan(LiveTasks& out) {
  GS_ASSIGN_OR_RETURN(std::vector<EtcdKv> rows, ScanAll(options_.prefix + "/t/"));
  for (const EtcdKv& kv : rows) GS_RETURN_IF_ERROR(TakeRecord(kv, out));
  return WriteIndex();
}

Status EtcdStore::WriteIndex() {
  const size_t chunk = options_.max_txn_ops - 3;  // the sequence key, max_id and the marker
  std::vector<EtcdOp> ops;
  for (const auto& [id, state] : state_of_) {
    ops.push_back(EtcdOp::Put(Key("s", TaskName(id)), state));
    if (ops.size() == chunk) GS_RETURN_IF_ERROR(SendTxn(std::exchange(ops, {})));
  }
  ops.push_back(EtcdOp::Put(Key("w", "max_id"), std::to_string(max_id_)));
  ops.push_back(EtcdOp::Put(Key("w", "index"), "1"));
  return SendTxn(std::move(ops));
}

// The records of `ids` (those that exist), a Txn of reads per chunk.
StatusOr<std::vector<EtcdKv>> EtcdStore::GetTasks(const std::vector<uint64_t>& ids) {
  std::vector<EtcdKv> rows;
  const size_t chunk = std::min<size_t>(options_.max_txn_ops, 64);
  for (size_t i = 0; i < ids.size(); i += chunk) {
    std::vector<EtcdOp> gets;
    for (size_t j = i; j < std::min(ids.size(), i + chunk); ++j) {
      gets.push_back(EtcdOp::Get(Key("t", TaskName(ids[j]))));
    }
    GS_ASSIGN_OR_RETURN(EtcdTxnResult r, client_->Txn({}, gets));
    for (EtcdRange& g : r.ranges) {
      for (EtcdKv& kv : g.kvs) rows.push_back(std::move(kv));
    }
  }
  return rows;
}

StatusOr<TaskRecord> EtcdStore::GetTask(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(EtcdRange r, client_->Range(Key("t", TaskName(id))));
  if (r.kvs.empty()) return NotFound("task " + std::to_string(id) + " not found");
  GS_ASSIGN_OR_RETURN(std::string text, Assemble(r.kvs[0]));
  return DecodeTask(text);
}

StatusOr<TaskPage> EtcdStore::ListTasks(std::optional<std::string> state, uint64_t after_id,
                                        size_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  if (limit == 0) limit = 1000;
  TaskPage page;
  std::vector<EtcdKv> rows;
  bool more = false;
  if (!state) {
    const std::string prefix = options_.prefix + "/t/";
    GS_ASSIGN_OR_RETURN(EtcdRange r, client_->Range(Key("t", TaskName(after_id + 1)),
                                                    EtcdClient::PrefixEnd(prefix),
                                                    static_cast<int64_t>(limit)));
    rows = std::move(r.kvs);
    more = r.more;
  } else {
    if (!indexed_) {
      return FailedPrecondition("etcd store: listing by state before the index was loaded");
    }
    std::vector<uint64_t> ids;
    const auto& set = by_state_[*state];
    for (auto it = set.upper_bound(after_id); it != set.end() && ids.size() < limit + 1; ++it) {
      ids.push_back(*it);
    }
    more = ids.size() > limit;
    if (more) ids.pop_back();
    GS_ASSIGN_OR_RETURN(rows, GetTasks(ids));
  }
  for (const EtcdKv& kv : rows) {
    GS_ASSIGN_OR_RETURN(std::string text, Assemble(kv));
    auto rec = DecodeTask(text);
    if (!rec.ok()) continue;  // quarantined at the next take-over; never served half-read
    page.tasks.push_back(std::move(rec).value());
  }
  if (more && !page.tasks.empty()) page.next_after_id = page.tasks.back().task.id.value();
  return page;
}

StatusOr<std::map<std::string, int64_t>> EtcdStore::CountTasksByState() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!indexed_) return FailedPrecondition("etcd store: counting before the index was loaded");
  std::map<std::string, int64_t> out;
  for (const auto& [state, ids] : by_state_) {
    if (!ids.empty()) out[state] = static_cast<int64_t>(ids.size());
  }
  return out;
}

StatusOr<std::optional<uint64_t>> EtcdStore::LookupIdempotencyKey(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(EtcdRange r, client_->Range(Key("k", key)));
  if (r.kvs.empty()) return std::optional<uint64_t>();
  try {
    return std::optional<uint64_t>(std::stoull(r.kvs[0].value));
  } catch (const std::exception&) {
    return DataLoss("etcd store: idempotency key \"" + key + "\" holds \"" + r.kvs[0].value + "\"");
  }
}

StatusOr<std::vector<NodeRecord>> EtcdStore::LoadNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(std::vector<EtcdKv> rows, ScanAll(options_.prefix + "/n/"));
  std::vector<NodeRecord> out;
  for (const EtcdKv& kv : rows) {
    GS_ASSIGN_OR_RETURN(std::string text, Assemble(kv));
    auto n = DecodeNode(text);
    if (!n.ok()) {
      const std::string name = kv.key.substr(options_.prefix.size() + 3);
      Json q = {{"record", text}, {"error", n.status().message()}};
      GS_RETURN_IF_ERROR(SendTxn({EtcdOp::Put(Key("q", "nodes/" + name), q.dump()), EtcdOp::Delete(kv.key)}));
      logging::Error("store", "quarantined node: " + n.status().message(), logging::NodeF(name));
      continue;
    }
    out.push_back(std::move(n).value());
  }
  return out;
}

StatusOr<std::vector<LearnedPeak>> EtcdStore::LoadLearnedPeaks() {
  std::lock_guard<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(std::vector<EtcdKv> rows, ScanAll(options_.prefix + "/p/"));
  std::vector<LearnedPeak> out;
  for (const EtcdKv& kv : rows) {
    try {
      Json v = Json::parse(kv.value);
      auto profile = DecodeProfile(v.at("profile").get<std::string>());
      if (!profile.ok()) continue;
      LearnedPeak p;
      p.profile = *profile;
      // Issue 36: an older version's value (the largest peak ever, unverified) has no
      // recent_mib and teaches nothing.
      if (!v.contains("recent_mib")) continue;
      p.recent_mib = v.at("recent_mib").get<std::vector<MiB>>();
      p.observations = v.at("observations").get<int64_t>();
      out.push_back(p);
    } catch (const std::exception& e) {
      logging::Warn("store", "ignored learned peak " + kv.key + ": " + e.what());
    }
  }
  return out;
}

StatusOr<std::vector<TokenRecord>> EtcdStore::LoadTokens() {
  std::lock_guard<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(std::vector<EtcdKv> rows, ScanAll(options_.prefix + "/a/"));
  std::vector<TokenRecord> out;
  for (const EtcdKv& kv : rows) {
    StatusOr<TokenRecord> t = DecodeToken(kv.value);
    if (!t.ok()) {  // cannot authenticate anyone; an admin creates another
      logging::Warn("store", "ignored token " + kv.key + ": " + t.status().message());
      continue;
    }
    out.push_back(std::move(t).value());
  }
  std::sort(out.begin(), out.end(),
            [](const TokenRecord& a, const TokenRecord& b) { return a.id < b.id; });
  return out;
}

StatusOr<std::vector<core::TeamQuota>> EtcdStore::LoadQuotas() {
  std::lock_guard<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(std::vector<EtcdKv> rows, ScanAll(options_.prefix + "/quota/"));
  std::vector<core::TeamQuota> out;
  for (const EtcdKv& kv : rows) {
    try {
      Json v = Json::parse(kv.value);
      core::TeamQuota q;
      q.team = v.at("team").get<std::string>();
      q.guaranteed_gpus = v.at("guaranteed_gpus").get<int64_t>();
      q.guaranteed_gpu_mem_mib = v.at("guaranteed_gpu_mem_mib").get<int64_t>();
      q.borrow_gpus = v.at("borrow_gpus").get<int64_t>();
      q.max_priority = v.value("max_priority", std::string());
      out.push_back(std::move(q));
    } catch (const std::exception& e) {
      logging::Warn("store", "ignored quota " + kv.key + ": " + e.what());
    }
  }
  std::sort(out.begin(), out.end(),
            [](const core::TeamQuota& a, const core::TeamQuota& b) { return a.team < b.team; });
  return out;
}

StatusOr<std::vector<RollupRow>> EtcdStore::LoadRollups(int64_t from_day, int64_t to_day) {
  if (from_day >= to_day) return std::vector<RollupRow>();
  std::lock_guard<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(std::vector<EtcdKv> rows,
                      ScanRange(RollupDayKey(from_day), RollupDayKey(to_day)));
  std::vector<RollupRow> out;
  for (const EtcdKv& kv : rows) {
    StatusOr<RollupRow> row = DecodeRollup(kv.value);
    if (!row.ok()) {  // lost, as a quota or token that does not decode; the rest counts
      logging::Warn("store", "ignored rollup row " + kv.key + ": " + row.status().message());
      continue;
    }
    out.push_back(std::move(row).value());
  }
  // The keys' order is the names' escaped bytes; the contract's is the names'.
  std::sort(out.begin(), out.end(),
            [](const RollupRow& a, const RollupRow& b) { return a.Key() < b.Key(); });
  return out;
}

StatusOr<std::vector<QuarantinedRow>> EtcdStore::LoadQuarantine() {
  std::lock_guard<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(std::vector<EtcdKv> rows, ScanAll(options_.prefix + "/q/"));
  std::vector<QuarantinedRow> out;
  for (const EtcdKv& kv : rows) {
    const std::string rest = kv.key.substr(options_.prefix.size() + 3);  // "tasks/12"
    const size_t slash = rest.find('/');
    QuarantinedRow q;
    q.table = rest.substr(0, slash);
    q.key = slash == std::string::npos ? "" : rest.substr(slash + 1);
    try {
      q.error = Json::parse(kv.value).value("error", "");
    } catch (const std::exception&) {
      q.error = "unreadable";
    }
    out.push_back(std::move(q));
  }
  return out;
}

}  // namespace gpusched::store
