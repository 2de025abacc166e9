#include "base/clock.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/check.h"

namespace gpusched {

TimeMs RealClock::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TimeMs RealClock::MonoMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t RealClock::NowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void RealClock::SleepMs(DurationMs d) {
  if (d > 0) std::this_thread::sleep_for(std::chrono::milliseconds(d));
}

bool RealClock::WaitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                        DurationMs d, const std::function<bool()>& pred) {
  return cv.wait_for(lock, std::chrono::milliseconds(std::max<DurationMs>(d, 0)), pred);
}

bool FakeClock::WaitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                        DurationMs d, const std::function<bool()>& pred) {
  const int64_t deadline_ns = now_ns_.load() + std::max<DurationMs>(d, 0) * 1'000'000;
  {
    std::lock_guard g(mu_);
    waiters_.push_back({lock.mutex(), &cv});
    ++sleepers_;
    cv_.notify_all();
  }
  while (!pred() && now_ns_.load() < deadline_ns) cv.wait(lock);
  {
    std::lock_guard g(mu_);
    --sleepers_;
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (it->cv == &cv && it->mu == lock.mutex()) {
        waiters_.erase(it);
        break;
      }
    }
  }
  return pred();
}

void FakeClock::WakeWaiters() {
  std::vector<Waiter> waiters;
  {
    std::lock_guard g(mu_);
    waiters = waiters_;
  }
  for (const Waiter& w : waiters) {
    std::lock_guard g(*w.mu);
    w.cv->notify_all();
  }
}

void FakeClock::SleepMs(DurationMs d) {
  if (d <= 0) return;
  if (auto_advance_) {
    AdvanceMs(d);
    return;
  }
  std::unique_lock lock(mu_);
  const int64_t wake_ns = now_ns_.load() + d * 1'000'000;
  ++sleepers_;
  cv_.notify_all();
  cv_.wait(lock, [&] { return now_ns_.load() >= wake_ns; });
  --sleepers_;
}

void FakeClock::AdvanceMs(DurationMs d) {
  GS_CHECK(d >= 0);
  {
    std::lock_guard lock(mu_);
    now_ns_.fetch_add(d * 1'000'000);
    cv_.notify_all();
  }
  WakeWaiters();
}

void FakeClock::SetMs(TimeMs t) {
  {
    std::lock_guard lock(mu_);
    GS_CHECK(t * 1'000'000 >= now_ns_.load());
    now_ns_.store(t * 1'000'000);
    cv_.notify_all();
  }
  WakeWaiters();
}

int FakeClock::sleepers() const {
  std::lock_guard lock(mu_);
  return sleepers_;
}

}  // namespace gpusched
