#include "agent/log_service.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "rpc/tls.h"

namespace gpusched::agent {

std::string LogFileName(uint64_t id, int64_t attempt) {
  return "task-" + std::to_string(id) + "-" + std::to_string(attempt) + ".log";
}

std::string LogPath(const std::string& log_dir, uint64_t id, int64_t attempt) {
  return log_dir + "/" + LogFileName(id, attempt);
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
  resp->set_next_offset(req->offset());
  // Never through a link, and a regular file only (a FIFO planted there would block).
  const int fd = open(LogPath(log_dir_, req->id(), req->attempt()).c_str(),
                      O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) close(fd);
    return grpc::Status::OK;  // not written yet: an empty read
  }
  std::string data(static_cast<size_t>(req->max_bytes() > 0 ? req->max_bytes() : 1 << 20), '\0');
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = pread(fd, data.data() + got, data.size() - got,
                            static_cast<off_t>(req->offset() + static_cast<int64_t>(got)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  data.resize(got);
  resp->set_next_offset(req->offset() + static_cast<int64_t>(data.size()));
  resp->set_data(std::move(data));
  return grpc::Status::OK;
}

}  // namespace gpusched::agent
