#include "agent/log_service.h"

#include <fstream>
#include <vector>

#include "rpc/tls.h"

namespace gpusched::agent {

std::string LogPath(const std::string& log_dir, uint64_t id, int64_t attempt) {
  return log_dir + "/task-" + std::to_string(id) + "-" + std::to_string(attempt) + ".log";
}

grpc::Status LogService::CheckCaller(grpc::ServerContext* ctx,
                                     const ::gpusched::v1::ReadLogRequest& req) const {
  if (!servers_only_) {
    const Status s =
        rpc::CheckLogRead(key_ != nullptr ? key_->Get() : "", req.id(), req.attempt(),
                          req.capability_expires_ms(), req.capability(),
                          clock_ != nullptr ? clock_->NowMs() : 0);
    if (s.ok()) return grpc::Status::OK;
    return {grpc::StatusCode::PERMISSION_DENIED, s.message()};
  }
  std::vector<std::string> names;
  if (auto auth = ctx->auth_context(); auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const grpc::string_ref& v : auth->FindPropertyValues("x509_subject_alternative_name")) {
      names.emplace_back(v.data(), v.size());
    }
  }
  if (!rpc::CertificateNamesNode(names, rpc::kServerCertName)) {
    return {grpc::StatusCode::PERMISSION_DENIED,
            "task logs are served to the gpusched servers only (a certificate naming " +
                std::string(rpc::kServerCertName) + ")"};
  }
  return grpc::Status::OK;
}

grpc::Status LogService::ReadLog(grpc::ServerContext* ctx,
                                 const ::gpusched::v1::ReadLogRequest* req,
                                 ::gpusched::v1::ReadLogResponse* resp) {
  if (grpc::Status who = CheckCaller(ctx, *req); !who.ok()) return who;
  if (req->offset() < 0 || req->max_bytes() < 0 || req->max_bytes() > (64 << 20)) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "offset/max_bytes: out of range"};
  }
  std::ifstream in(LogPath(log_dir_, req->id(), req->attempt()), std::ios::binary);
  resp->set_next_offset(req->offset());
  if (!in) return grpc::Status::OK;  // not written yet: an empty read
  in.seekg(req->offset());
  std::string data(static_cast<size_t>(req->max_bytes() > 0 ? req->max_bytes() : 1 << 20), '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  resp->set_next_offset(req->offset() + static_cast<int64_t>(data.size()));
  resp->set_data(std::move(data));
  return grpc::Status::OK;
}

}  // namespace gpusched::agent
