#include "dispatch/cancel_token.h"

#include <utility>

namespace gpusched::dispatch {

void CancelToken::Cancel() {
  std::lock_guard lock(mu_);
  if (cancelled_) return;
  cancelled_ = true;
  for (auto& [id, fn] : callbacks_) fn();
}

void CancelToken::Reset() {
  std::lock_guard lock(mu_);
  cancelled_ = false;
}

uint64_t CancelToken::Subscribe(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  callbacks_.emplace(id, std::move(fn));
  return id;
}

void CancelToken::Unsubscribe(uint64_t id) {
  std::lock_guard lock(mu_);  // waits for a Cancel running the callback
  callbacks_.erase(id);
}

CancelSubscription::CancelSubscription(CancelToken* token, std::function<void()> fn)
    : token_(token) {
  if (token_ != nullptr) id_ = token_->Subscribe(std::move(fn));
}

CancelSubscription::~CancelSubscription() {
  if (token_ != nullptr) token_->Unsubscribe(id_);
}

}  // namespace gpusched::dispatch
