#pragma once
// LogService: the gpusched.v1.Agent service each agent serves on its --listen address. The
// server reads task logs through it for `gpusched logs`.

#include <string>

#include "gpusched/v1/gpusched.grpc.pb.h"

namespace gpusched::agent {

// The name of the log of one attempt ("task-ID-ATTEMPT.log"), and where it lives under
// `log_dir`. Its side files are this name plus a suffix (".gpumem", ".peak", ...).
std::string LogFileName(uint64_t id, int64_t attempt);
std::string LogPath(const std::string& log_dir, uint64_t id, int64_t attempt);

class LogService final : public ::gpusched::v1::Agent::Service {
 public:
  // `servers_only`: the service runs over mutual TLS and answers only peers whose verified
  // certificate names rpc::kServerCertName (the servers), not other agents or users.
  explicit LogService(std::string log_dir, bool servers_only = false)
      : log_dir_(std::move(log_dir)), servers_only_(servers_only) {}
  grpc::Status ReadLog(grpc::ServerContext*, const ::gpusched::v1::ReadLogRequest* req,
                       ::gpusched::v1::ReadLogResponse* resp) override;

 private:
  const std::string log_dir_;
  const bool servers_only_;
};

}  // namespace gpusched::agent
