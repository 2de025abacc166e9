#include "dispatch/c_api/async_requests.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpusched_c.h"

namespace gpusched::capi {

StatusOr<std::unique_ptr<AsyncRequests>> AsyncRequests::Create(Clock& clock, int64_t recheck_ms) {
  const int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) {
    return Unavailable(std::string("acquire_async: timerfd_create failed: ") + std::strerror(errno));
  }
  return std::unique_ptr<AsyncRequests>(new AsyncRequests(clock, fd, recheck_ms));
}

AsyncRequests::AsyncRequests(Clock& clock, int fd, int64_t recheck_ms)
    : clock_(clock), fd_(fd), recheck_ms_(recheck_ms) {}

AsyncRequests::~AsyncRequests() { close(fd_); }

uint64_t AsyncRequests::Submit(AsyncRequest r, const TryGrant& try_grant) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  r.id = id;
  if (r.deadline_ns > 0) deadlines_.insert({r.deadline_ns, r.id});
  order_.insert({-static_cast<int64_t>(r.priority), r.id});
  queued_[r.id] = std::move(r);
  PumpLocked(try_grant);
  return id;
}

void AsyncRequests::Pump(const TryGrant& try_grant) {
  std::lock_guard lock(mu_);
  PumpLocked(try_grant);
}

void AsyncRequests::PumpLocked(const TryGrant& try_grant) {
  ExpireLocked(clock_.NowNs());
  while (!order_.empty()) {
    auto it = queued_.find(order_.begin()->second);
    AsyncTry t = try_grant(it->second);
    if (t.code == AsyncTry::kBusy) break;  // nothing of lower priority, or younger, may pass it
    const uint64_t id = it->first;
    EraseLocked(it);
    CompleteLocked(id, t.code, t.lease, std::move(t.message));
  }
  ArmLocked(clock_.NowNs());
}

void AsyncRequests::ExpireLocked(int64_t now_ns) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now_ns) {
    auto it = queued_.find(deadlines_.begin()->second);
    const AsyncRequest r = it->second;
    EraseLocked(it);
    expired_[r.service]++;
    const double waited_ms = static_cast<double>(now_ns - r.requested_ns) / 1e6;
    if (r.deadline_is_timeout) {
      CompleteLocked(r.id, GPUSCHED_E_UNAVAILABLE, {},
                     "acquire_async: no GPU granted within the dispatcher's acquire_timeout_ms "
                     "(waited " + std::to_string(waited_ms) + " ms)");
    } else {
      CompleteLocked(r.id, GPUSCHED_E_DEADLINE_EXCEEDED, {},
                     "acquire_async: deadline_ms passed before a GPU was granted (waited " +
                         std::to_string(waited_ms) + " ms)");
    }
  }
}

void AsyncRequests::EraseLocked(std::map<uint64_t, AsyncRequest>::iterator it) {
  if (it->second.deadline_ns > 0) deadlines_.erase({it->second.deadline_ns, it->first});
  order_.erase({-static_cast<int64_t>(it->second.priority), it->first});
  queued_.erase(it);
}

void AsyncRequests::CompleteLocked(uint64_t id, int code, dispatch::Lease lease,
                                   std::string message) {
  done_.push_back({id, code, lease, std::move(message)});
}

Status AsyncRequests::Cancel(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = queued_.find(id);
  if (it == queued_.end()) {
    return NotFound("request: " + std::to_string(id) +
                    " is not queued (completed already: take its result with "
                    "gpusched_dispatcher_poll_async; or never submitted to this dispatcher)");
  }
  EraseLocked(it);
  CompleteLocked(id, GPUSCHED_E_CANCELLED, {}, "acquire_async: cancelled");
  ArmLocked(clock_.NowNs());
  return Status::Ok();
}

std::vector<AsyncCompletion> AsyncRequests::Take(size_t cap, const TryGrant& try_grant) {
  std::lock_guard lock(mu_);
  uint64_t expirations;
  while (read(fd_, &expirations, sizeof expirations) > 0) {
  }  // clears the fd; EAGAIN once clear. ArmLocked below fires it again if needed.
  armed_ns_ = -1;
  PumpLocked(try_grant);
  std::vector<AsyncCompletion> out;
  while (!done_.empty() && out.size() < cap) {
    out.push_back(std::move(done_.front()));
    done_.pop_front();
  }
  ArmLocked(clock_.NowNs());
  return out;
}

void AsyncRequests::Wake() {
  std::lock_guard lock(mu_);
  itimerspec at{};
  at.it_value.tv_nsec = 1;  // an absolute time long past: fires at once
  timerfd_settime(fd_, TFD_TIMER_ABSTIME, &at, nullptr);
  armed_ns_ = 1;
}

size_t AsyncRequests::queued() const {
  std::lock_guard lock(mu_);
  return queued_.size();
}

uint64_t AsyncRequests::expired(int service) const {
  std::lock_guard lock(mu_);
  auto it = expired_.find(service);
  return it == expired_.end() ? 0 : it->second;
}

void AsyncRequests::ArmLocked(int64_t now_ns) {
  int64_t at_ns = 0;  // 0: disarmed
  if (!done_.empty()) {
    at_ns = 1;
  } else if (!queued_.empty()) {
    at_ns = recheck_ms_ > 0 ? now_ns + recheck_ms_ * 1'000'000 : 0;
    if (!deadlines_.empty() && (at_ns == 0 || deadlines_.begin()->first < at_ns)) {
      at_ns = deadlines_.begin()->first;
    }
  }
  if (at_ns == armed_ns_) return;  // armed so already (a fired fd stays readable until read)
  armed_ns_ = at_ns;
  itimerspec at{};
  at.it_value.tv_sec = at_ns / 1'000'000'000;
  at.it_value.tv_nsec = at_ns % 1'000'000'000;
  if (at_ns > 0 && at.it_value.tv_sec == 0 && at.it_value.tv_nsec == 0) at.it_value.tv_nsec = 1;
  timerfd_settime(fd_, TFD_TIMER_ABSTIME, &at, nullptr);
}

}  // namespace gpusched::capi
