#include "base/clock.h"

#include <chrono>
#include <thread>

#include "base/check.h"

namespace gpusched {

TimeMs RealClock::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
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
  std::lock_guard lock(mu_);
  now_ns_.fetch_add(d * 1'000'000);
  cv_.notify_all();
}

void FakeClock::SetMs(TimeMs t) {
  std::lock_guard lock(mu_);
  GS_CHECK(t * 1'000'000 >= now_ns_.load());
  now_ns_.store(t * 1'000'000);
  cv_.notify_all();
}

int FakeClock::sleepers() const {
  std::lock_guard lock(mu_);
  return sleepers_;
}

}  // namespace gpusched
