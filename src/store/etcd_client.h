#pragma once
// EtcdClient: the few etcd v3 calls gpusched uses (range, txn, leases, compaction, member
// status), over the JSON gateway that etcd 3.4 serves under /v3/ on its client URLs.
//
// Why the gateway rather than gRPC with our own copy of etcd's .proto: the calls are few and
// small, and a commit's cost is etcd's raft round and fsync, which a binary encoding would not
// shorten (src/store/README.md). The gateway's
// quirks are handled here and only here: byte fields are base64, int64 values come back as
// strings, fields with default values (false, 0, empty) are omitted.
//
// Endpoints: a call tries the endpoint that answered last, then the others in order; a
// transport error moves on, an answer from etcd (even an error) does not. With
// `retry_for_ms`, passes over the endpoints repeat while some endpoint accepted the
// connection but did not answer in time (a member waiting out etcd's own leader election:
// etcd holds such a request for 7 s before it answers "request timed out"); when every
// endpoint refuses the connection the call fails at once. Unavailable only when no endpoint
// answered.
//
// A request that timed out may still be applied by etcd later: callers that send it again
// elsewhere must make it safe to apply twice or late (EtcdStore guards each Txn by its
// commit sequence key).
//
// Thread-safety: safe from several threads; calls on one client are serialized, so the
// leader election and the store each use a client of their own.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpusched::store {

struct EtcdKv {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

struct EtcdCompare {
  enum class Target { kCreateRevision, kModRevision, kVersion, kValue };
  std::string key;
  Target target = Target::kCreateRevision;
  int64_t number = 0;  // revision or version
  std::string value;   // kValue
  // The comparison is always EQUAL: all gpusched needs.
};

struct EtcdOp {
  enum class Kind { kPut, kDelete, kRange };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;      // kPut
  std::string range_end;  // kDelete, kRange: "" = the key alone
  int64_t lease = 0;      // kPut
  int64_t limit = 0;      // kRange: 0 = no limit

  static EtcdOp Put(std::string key, std::string value, int64_t lease = 0);
  static EtcdOp Delete(std::string key, std::string range_end = "");
  static EtcdOp Get(std::string key, std::string range_end = "", int64_t limit = 0);
};

struct EtcdRange {
  std::vector<EtcdKv> kvs;
  bool more = false;
  int64_t count = 0;
  int64_t revision = 0;  // the store's revision when it answered
};

struct EtcdTxnResult {
  bool succeeded = false;
  int64_t revision = 0;
  std::vector<EtcdRange> ranges;  // one per kRange op of the branch taken, in order
};

struct EtcdMemberStatus {
  std::string endpoint;
  bool healthy = false;
  std::string error;       // when not healthy
  std::string version;     // etcd's
  uint64_t member_id = 0;
  uint64_t leader_id = 0;  // the raft leader this member sees
  int64_t db_size = 0;
  int64_t raft_term = 0;
};

class EtcdClient {
 public:
  struct Options {
    int connect_timeout_ms = 1'000;
    int request_timeout_ms = 5'000;  // per attempt on one endpoint
    int retry_for_ms = 0;            // 0: one pass over the endpoints
  };
  // `endpoints`: URLs as etcd's --advertise-client-urls ("http://127.0.0.1:2379"); at least one.
  static StatusOr<std::unique_ptr<EtcdClient>> Create(std::vector<std::string> endpoints,
                                                       Options options);
  static StatusOr<std::unique_ptr<EtcdClient>> Create(std::vector<std::string> endpoints) {
    return Create(std::move(endpoints), Options{});
  }
  ~EtcdClient();

  // `revision` 0 = the latest; an older one fails once compacted.
  StatusOr<EtcdRange> Range(const std::string& key, const std::string& range_end = "",
                            int64_t limit = 0, int64_t revision = 0);
  StatusOr<EtcdTxnResult> Txn(const std::vector<EtcdCompare>& compare,
                              const std::vector<EtcdOp>& success,
                              const std::vector<EtcdOp>& failure = {});
  // A new lease of `ttl_s` seconds; returns its id. etcd may raise a short TTL (its minimum
  // is 1.5 x its election timeout).
  StatusOr<int64_t> LeaseGrant(int64_t ttl_s);
  // One keepalive; returns the TTL etcd set, 0 when the lease no longer exists.
  StatusOr<int64_t> LeaseKeepAlive(int64_t lease);
  Status LeaseRevoke(int64_t lease);
  // Drops the history before `revision` (older revisions of keys, not current values).
  Status Compact(int64_t revision);
  // Every endpoint's own status (not failing over: one answer per endpoint).
  std::vector<EtcdMemberStatus> MemberStatuses();

  const std::vector<std::string>& endpoints() const { return endpoints_; }

  // Issue 39: the etcd cluster this client first reached (`header.cluster_id` of its first
  // answer; 0 = none yet). An answer from another cluster (etcd rebuilt with another token or
  // members, an endpoint of another cluster) fails that call and every later one with
  // FailedPrecondition naming both ids; Identity() says the same from then on. Not blocked by
  // a request in flight.
  Status Identity() const;
  uint64_t cluster_id() const { return cluster_id_.load(std::memory_order_acquire); }

  // The range_end that makes a range cover every key starting with `prefix`.
  static std::string PrefixEnd(const std::string& prefix);
  static std::string Base64Encode(const std::string& bytes);
  static StatusOr<std::string> Base64Decode(const std::string& text);

  struct Conn;  // one HTTP/1.1 keep-alive connection per endpoint

 private:
  EtcdClient(std::vector<std::string> endpoints, Options options);
  // POSTs `body` to `path` on one endpoint after another; the parsed JSON answer as text.
  StatusOr<std::string> Post(const std::string& path, const std::string& body);
  // Records `id` (an answer's cluster id from `url`; 0 = not said) or refuses another one.
  Status CheckCluster(const std::string& url, uint64_t id);

  const std::vector<std::string> endpoints_;
  const Options options_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> conns_;  // one per endpoint
  size_t current_ = 0;
  std::atomic<uint64_t> cluster_id_{0};
  std::atomic<bool> other_cluster_{false};
  mutable std::mutex identity_mu_;
  std::string identity_error_;  // set once, with other_cluster_
};

// The `header.cluster_id` of one of etcd's JSON answers (the gateway writes the header first,
// the id as a decimal string); 0 when the answer does not say it.
uint64_t AnswerClusterId(std::string_view answer);

// ---- the wire, exposed for tests and the fuzz target (fuzz/etcd_wire_fuzzer.cc) ----
struct HttpAnswer {
  int status = 0;
  std::string body;
  bool close = false;  // the peer closes the connection after it
};
// Reads one HTTP/1.1 answer (Content-Length, chunked with trailers, or until close) from
// `buf`, calling `fill` to append more bytes (false: no more). Unavailable when cut short,
// malformed or over 64 MiB.
StatusOr<HttpAnswer> ReadHttpAnswer(const std::function<bool(std::string&)>& fill,
                                    std::string& buf);
// The gateway's JSON answers to /v3/kv/range and /v3/kv/txn.
StatusOr<EtcdRange> ParseRangeAnswer(const std::string& text);
StatusOr<EtcdTxnResult> ParseTxnAnswer(const std::string& text);

// Splits "http://a:1,http://b:2" into URLs; an entry without a scheme gets "http://".
// InvalidArgument naming `field` for an empty list or an entry that is not HOST:PORT.
StatusOr<std::vector<std::string>> ParseEtcdEndpoints(const std::string& list,
                                                      const std::string& field);

}  // namespace gpusched::store
