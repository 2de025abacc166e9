#pragma once
// Issue 35: the capability that lets the server, and only the server, read a task's log from
// an agent's log service when no TLS certificate proves who calls.
//
// At each registration the server hands the agent a fresh random key (Registered.log_read_key,
// over the agent's authenticated link). For every read the server signs
//   HMAC-SHA256(key, "gpusched-log-read/v1" 0 id 0 attempt 0 expires_ms)
// and the agent's log service checks it: the same key, the same task attempt, and its own wall
// clock not past expires_ms. Nobody else holds the key, so a local user who dials the agent's
// log service directly is refused.
//
// Thread-safety: the functions are pure; LogReadKey's methods may be called from any thread.

#include <cstdint>
#include <mutex>
#include <string>

#include "base/status.h"

namespace gpusched::rpc {

// How long a signed read stays valid (generous: the agent's clock may differ from the server's).
inline constexpr int64_t kLogCapabilityTtlMs = 5 * 60 * 1000;

// 32 random bytes (OpenSSL RAND_bytes). Internal when the random source fails.
StatusOr<std::string> NewLogReadKey();

// The capability for reading attempt `attempt` of task `id` until `expires_ms` (raw 32 bytes).
std::string SignLogRead(const std::string& key, uint64_t id, int64_t attempt, int64_t expires_ms);

// Ok when `capability` is SignLogRead(key, id, attempt, expires_ms) and now_ms <= expires_ms;
// PermissionDenied saying which check failed otherwise (an empty key refuses everything).
Status CheckLogRead(const std::string& key, uint64_t id, int64_t attempt, int64_t expires_ms,
                    const std::string& capability, int64_t now_ms);

// The key an agent holds: replaced at each registration, read by its log service.
class LogReadKey {
 public:
  void Set(std::string key) {
    std::lock_guard<std::mutex> lock(mu_);
    key_ = std::move(key);
  }
  std::string Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return key_;
  }

 private:
  mutable std::mutex mu_;
  std::string key_;
};

}  // namespace gpusched::rpc
