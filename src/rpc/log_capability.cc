#include "rpc/log_capability.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace gpusched::rpc {

StatusOr<std::string> NewLogReadKey() {
  std::string key(32, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), static_cast<int>(key.size())) !=
      1) {
    return Internal("log read key: the random source (RAND_bytes) failed");
  }
  return key;
}

std::string SignLogRead(const std::string& key, uint64_t id, int64_t attempt,
                        int64_t expires_ms) {
  std::string message = "gpusched-log-read/v1";
  for (const std::string& part :
       {std::to_string(id), std::to_string(attempt), std::to_string(expires_ms)}) {
    message.push_back('\0');
    message += part;
  }
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac,
           &len) == nullptr) {
    return "";  // out of memory: an empty capability never checks
  }
  return std::string(reinterpret_cast<const char*>(mac), len);
}

Status CheckLogRead(const std::string& key, uint64_t id, int64_t attempt, int64_t expires_ms,
                    const std::string& capability, int64_t now_ms) {
  if (key.empty()) {
    return PermissionDenied("task logs are served to the gpusched server only, and this agent "
                            "has not registered with one yet");
  }
  if (capability.empty()) {
    return PermissionDenied("task logs are served to the gpusched server only: the read "
                            "carries no capability signed by the server");
  }
  const std::string want = SignLogRead(key, id, attempt, expires_ms);
  if (want.empty() || want.size() != capability.size() ||
      CRYPTO_memcmp(want.data(), capability.data(), want.size()) != 0) {
    return PermissionDenied("task logs are served to the gpusched server only: the read's "
                            "capability is not the server's (or not for task " +
                            std::to_string(id) + " attempt " + std::to_string(attempt) + ")");
  }
  if (now_ms > expires_ms) {
    return PermissionDenied("task logs: the read's capability expired " +
                            std::to_string(now_ms - expires_ms) + " ms ago");
  }
  return Status::Ok();
}

}  // namespace gpusched::rpc
