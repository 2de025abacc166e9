#include "server/log_reader.h"

#include <chrono>

#include "rpc/channel.h"
#include "rpc/log_capability.h"

namespace gpusched::server {

StatusOr<std::shared_ptr<v1::Agent::Stub>> LogReader::AgentStub(const ControlPlane& cp,
                                                                 const std::string& address,
                                                                 const std::string& node) {
  std::lock_guard<std::mutex> lock(stubs_mu_);
  auto& stub = stubs_[address + "/" + node];
  if (stub) return stub;
  rpc::ClientTls tls;
  if (const std::string& dir = cp.config().tls_dir; !dir.empty()) {
    GS_ASSIGN_OR_RETURN(tls, rpc::LoadLogReaderTls(dir));
    tls.server_name = node;
  }
  stub = v1::Agent::NewStub(rpc::MakeChannel(address, false, &tls));
  return stub;
}

StatusOr<v1::LogsResponse> LogReader::Read(ControlPlane& cp, uint64_t id, int64_t offset,
                                           int64_t max_bytes, int rank, int64_t attempt) {
  if (offset < 0) return InvalidArgument("offset: must be >= 0");
  if (attempt < 0) return InvalidArgument("attempt: must be >= 1 (0 = the latest)");
  GS_ASSIGN_OR_RETURN(ControlPlane::LogSource src, cp.LogSourceOf(id, rank, attempt));
  v1::LogsResponse resp;
  resp.set_task_done(src.done);
  resp.set_attempt(src.attempt);
  resp.set_next_offset(offset);
  if (src.address.empty()) return resp;  // not started yet
  v1::ReadLogRequest r;
  r.set_id(id);
  r.set_attempt(src.attempt);
  r.set_offset(offset);
  r.set_max_bytes(max_bytes > 0 ? std::min(max_bytes, kMaxChunk) : kMaxChunk);
  // Issue 35: signed with the node's registration key; an agent without TLS answers only this.
  if (!src.log_read_key.empty()) {
    const int64_t expires = cp.clock().NowMs() + rpc::kLogCapabilityTtlMs;
    r.set_capability_expires_ms(expires);
    r.set_capability(rpc::SignLogRead(src.log_read_key, id, src.attempt, expires));
  }
  v1::ReadLogResponse out;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  GS_ASSIGN_OR_RETURN(std::shared_ptr<v1::Agent::Stub> stub, AgentStub(cp, src.address, src.node));
  grpc::Status s = stub->ReadLog(&ctx, r, &out);
  if (!s.ok()) {
    // Not Unavailable: the client would read it as this server being unreachable (exit 3,
    // "start one with gpusched dev"). The server answered; the node holding the log did not.
    return FailedPrecondition("the log of task " + std::to_string(id) + " is on node " +
                              src.node + " (" + src.address + "), whose agent did not answer (" +
                              s.error_message() + "); it can be read once that agent is back");
  }
  resp.set_data(out.data());
  resp.set_next_offset(out.next_offset());
  return resp;
}

}  // namespace gpusched::server
