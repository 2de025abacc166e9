#pragma once
// LogReader: reads a task's output where it lives, on the agent that ran the task's latest
// attempt (the server keeps no copy). Shared by the gRPC Logs call and the REST API's
// /tasks/{id}/logs, so both read the same bytes the same way.
//
// Thread-safety: Read may be called from any thread (the stub cache has its own lock).

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "gpusched/v1/gpusched.grpc.pb.h"
#include "server/control_plane.h"

namespace gpusched::server {

class LogReader {
 public:
  static constexpr int64_t kMaxChunk = 1 << 20;


  // Up to `max_bytes` (0 or above kMaxChunk = kMaxChunk) from byte `offset` of the latest
  // attempt's log. NotFound for an unknown task, InvalidArgument for a negative offset,
  // Unavailable when the agent holding the log does not answer. A task that never started
  // answers an empty chunk.
  // `cp`: the control plane that knows where the task ran (with HA, the current leader's).
  // `rank`: a gang's rank, whose node holds its log (0 for other tasks).
  StatusOr<v1::LogsResponse> Read(ControlPlane& cp, uint64_t id, int64_t offset,
                                  int64_t max_bytes, int rank = 0, int64_t attempt = 0);

 private:
  // With TLS (cp's tls_dir) the channel presents the server's certificate and checks that
  // the agent's names `node`.
  StatusOr<std::shared_ptr<v1::Agent::Stub>> AgentStub(const ControlPlane& cp,
                                                       const std::string& address,
                                                       const std::string& node);

  std::mutex stubs_mu_;
  std::map<std::string, std::shared_ptr<v1::Agent::Stub>> stubs_;
};

}  // namespace gpusched::server
