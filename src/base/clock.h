#pragma once
// Clock: the only source of time for gpusched libraries. `core` and `dispatch` take a
// `Clock&` and never read the system clock, so the server (RealClock), the simulator and
// every test (FakeClock) run the very same decision code.
//
// Units: TimeMs is milliseconds since an arbitrary epoch (the Unix epoch for RealClock).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace gpusched {

using TimeMs = int64_t;
using DurationMs = int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  // Current time in ms. Thread-safe.
  virtual TimeMs NowMs() const = 0;
  // Current time in ns, for latency measurements. Thread-safe.
  virtual int64_t NowNs() const = 0;
  // Blocks the calling thread for `d` ms of this clock's time. Thread-safe.
  virtual void SleepMs(DurationMs d) = 0;
  // Waits on `cv` until `pred()` holds or `d` ms of this clock's time have passed; returns
  // pred(). REQUIRES: `lock` holds the mutex that guards what `pred` reads and that notifiers
  // of `cv` take. Every timed wait of the server goes through here, so a test drives the
  // control plane's loops with a FakeClock.
  virtual bool WaitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                       DurationMs d, const std::function<bool()>& pred) = 0;
};

// Wall-clock time (system_clock for NowMs, steady_clock for NowNs and sleeping).
class RealClock final : public Clock {
 public:
  TimeMs NowMs() const override;
  int64_t NowNs() const override;
  void SleepMs(DurationMs d) override;
  bool WaitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, DurationMs d,
               const std::function<bool()>& pred) override;
};

// Manually advanced time for tests and the simulator. SleepMs blocks until another thread
// advances the clock past the wake-up time, or, in auto-advance mode, advances the clock
// itself (useful for single-threaded tests of retry loops).
// Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimeMs start_ms = 0, bool auto_advance_on_sleep = false)
      : now_ns_(start_ms * 1'000'000), auto_advance_(auto_advance_on_sleep) {}

  TimeMs NowMs() const override { return now_ns_.load() / 1'000'000; }
  int64_t NowNs() const override { return now_ns_.load(); }
  void SleepMs(DurationMs d) override;
  // Wakes when another thread advances the clock past the deadline (AdvanceMs takes the
  // waiter's mutex before notifying, so no wake-up is lost). REQUIRES: the thread that
  // advances the clock holds none of the waiters' mutexes.
  bool WaitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, DurationMs d,
               const std::function<bool()>& pred) override;

  void AdvanceMs(DurationMs d);
  void SetMs(TimeMs t);  // REQUIRES: t >= NowMs()
  // Number of threads currently blocked in SleepMs (lets tests wait for a quiescent state).
  int sleepers() const;

 private:
  std::atomic<int64_t> now_ns_;
  const bool auto_advance_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int sleepers_ = 0;
  struct Waiter {
    std::mutex* mu;
    std::condition_variable* cv;
  };
  std::vector<Waiter> waiters_;  // threads inside WaitFor
  void WakeWaiters();
};

}  // namespace gpusched
