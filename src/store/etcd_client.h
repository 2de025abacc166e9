#pragma once
// EtcdClient: the etcd v3 calls gpusched uses (range, txn, leases with a keep-alive stream,
// watch, compaction, member status), over etcd's own gRPC API (issue 38): the subset of
// etcd 3.4's `etcdserverpb`/`mvccpb`/`authpb` written in proto/etcd/, converted to and from
// these types by etcd_convert.h and only there.
//
// Security: an `https://` endpoint is dialled with TLS, verified against `tls.ca_pem` (the
// system's roots when empty), presenting `tls.cert_pem`/`key_pem` as the client certificate
// when set (etcd's --client-cert-auth). With `user` set, the client authenticates (etcd's
// Authenticate) and sends the token on every call, authenticating again when etcd says the
// token expired. Which endpoints a server may dial in plaintext is the server's rule
// (server_config.cc: loopback only, unless --insecure).
//
// Endpoints: a call tries the endpoint that answered last, then the others in order; a
// transport error (nothing reached, or no answer in time) moves on, an answer from etcd (even
// an error) does not, except etcd's own "no leader" / "leader changed", which a member says
// while its raft elects. With `retry_for_ms`, passes over the endpoints repeat while some
// endpoint was reached but did not answer (a member waiting out etcd's leader election);
// when no endpoint can be reached at all the call fails at once. Unavailable only when no
// endpoint answered.
//
// A request that timed out may still be applied by etcd later: callers that send it again
// elsewhere must make it safe to apply twice or late (EtcdStore guards each Txn by its
// commit sequence key), and a caller that cannot must treat the outcome as unknown.
//
// Thread-safety: every method is safe from several threads. Unary calls run concurrently; the
// keep-alive stream is one per client (calls serialized), and each WatchKey is a stream of its
// own that CancelWatches() ends from any thread.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
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

// What a watch saw on its key.
struct EtcdEvent {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  EtcdKv kv;  // kDelete: the key and the deletion's revision (mod_revision)
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

// PEM text of the TLS set-up for https:// endpoints. cert_pem and key_pem are both set or
// both empty.
struct EtcdTls {
  std::string ca_pem;    // "" = the system's roots
  std::string cert_pem;  // the client certificate
  std::string key_pem;
};
// Reads the files named by --etcd-ca, --etcd-cert and --etcd-key (any may be ""): an error
// names the flag and the file. The certificate and the key come together or not at all.
StatusOr<EtcdTls> LoadEtcdTls(const std::string& ca_file, const std::string& cert_file,
                              const std::string& key_file);
// The password in `file` (--etcd-password-file): its first line. An error names the file.
StatusOr<std::string> ReadEtcdPassword(const std::string& file);

class EtcdClient {
 public:
  struct Options {
    int connect_timeout_ms = 1'000;
    int request_timeout_ms = 5'000;  // per attempt on one endpoint
    int retry_for_ms = 0;            // 0: one pass over the endpoints
    EtcdTls tls;                     // for https:// endpoints
    std::string user;                // "" = no etcd authentication
    std::string password;
  };
  // `endpoints`: URLs as etcd's --advertise-client-urls ("http://127.0.0.1:2379",
  // "https://etcd-0:2379"); at least one.
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
  // One keep-alive over the client's keep-alive stream (opened on first use and again after
  // a failure); returns the TTL etcd set, 0 when the lease no longer exists. Waits at most
  // request_timeout_ms for the answer.
  StatusOr<int64_t> LeaseKeepAlive(int64_t lease);
  // NotFound-free: a lease that no longer exists is revoked already.
  Status LeaseRevoke(int64_t lease);
  // Drops the history before `revision` (older revisions of keys, not current values).
  Status Compact(int64_t revision);
  // Every endpoint's own status (not failing over: one answer per endpoint).
  std::vector<EtcdMemberStatus> MemberStatuses();

  // Watches `key` from `start_revision` (0 = from now) and returns the first events etcd
  // sends; empty when `timeout_ms` passed without one or CancelWatches() was called.
  // FailedPrecondition "compacted" when start_revision is older than etcd keeps.
  StatusOr<std::vector<EtcdEvent>> WatchKey(const std::string& key, int64_t start_revision,
                                            int timeout_ms);
  // Ends every WatchKey in progress (it returns no events) and the ones started until
  // ResumeWatches(); for a caller that stops.
  void CancelWatches();
  void ResumeWatches();

  const std::vector<std::string>& endpoints() const { return endpoints_; }
  // What this client was created with (TLS and user included): for a second client.
  const Options& options() const;

  // Issue 39: the etcd cluster this client first reached (`header.cluster_id` of its first
  // answer; 0 = none yet). An answer from another cluster (etcd rebuilt with another token or
  // members, an endpoint of another cluster) fails that call and every later one with
  // FailedPrecondition naming both ids; Identity() says the same from then on.
  Status Identity() const;
  uint64_t cluster_id() const { return cluster_id_.load(std::memory_order_acquire); }
  // Records `id` (an answer's cluster id from `url`; 0 = not said) or refuses another one.
  Status CheckCluster(const std::string& url, uint64_t id);

  // The range_end that makes a range cover every key starting with `prefix`.
  static std::string PrefixEnd(const std::string& prefix);

  struct Impl;  // the channels, stubs and streams (etcd_client.cc)

 private:
  EtcdClient(std::vector<std::string> endpoints, Options options);

  const std::vector<std::string> endpoints_;
  std::unique_ptr<Impl> impl_;
  std::atomic<uint64_t> cluster_id_{0};
  std::atomic<bool> other_cluster_{false};
  mutable std::mutex identity_mu_;
  std::string identity_error_;  // set once, with other_cluster_
};

// Splits "http://a:1,https://b:2" into URLs; an entry without a scheme gets "http://".
// InvalidArgument naming `field` for an empty list or an entry that is not HOST:PORT.
StatusOr<std::vector<std::string>> ParseEtcdEndpoints(const std::string& list,
                                                      const std::string& field);
// Whether `url`'s host is a loopback address or "localhost" (plaintext allowed there).
bool EtcdEndpointIsLoopback(const std::string& url);

}  // namespace gpusched::store
