#pragma once
// LogService: the gpusched.v1.Agent service each agent serves on its --listen address. The
// server reads task logs through it for `gpusched logs`; nobody else may (issue 35).

#include <string>

#include "base/clock.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "rpc/log_capability.h"

namespace gpusched::agent {

// The name of the log of one attempt ("task-ID-ATTEMPT.log"), and where it lives under
// `log_dir`. Its side files are this name plus a suffix (".gpumem", ".peak", ...).
std::string LogFileName(uint64_t id, int64_t attempt);
std::string LogPath(const std::string& log_dir, uint64_t id, int64_t attempt);

class LogService final : public ::gpusched::v1::Agent::Service {
 public:
  // `servers_only`: the service runs over mutual TLS and answers only peers whose verified
  // certificate names rpc::kServerCertName (the servers), not other agents or users.
  // Otherwise (plaintext) a read must carry a capability signed with `key` (the current
  // registration's, rpc/log_capability.h), checked against `clock`'s wall time.
  // REQUIRES: key and clock outlive the service (they may be null only with servers_only).
  LogService(std::string log_dir, bool servers_only, const rpc::LogReadKey* key,
             const Clock* clock)
      : log_dir_(std::move(log_dir)), servers_only_(servers_only), key_(key), clock_(clock) {}
  grpc::Status ReadLog(grpc::ServerContext*, const ::gpusched::v1::ReadLogRequest* req,
                       ::gpusched::v1::ReadLogResponse* resp) override;

 private:
  // Ok when the caller is the server: its certificate (servers_only_) or a signed read.
  grpc::Status CheckCaller(grpc::ServerContext* ctx,
                           const ::gpusched::v1::ReadLogRequest& req) const;

  const std::string log_dir_;
  const bool servers_only_;
  const rpc::LogReadKey* key_;
  const Clock* clock_;
};

}  // namespace gpusched::agent
