#pragma once
// Clock: the only source of time for gpusched libraries. `core` and `dispatch` take a
// `Clock&` and never read the system clock, so the server (RealClock), the simulator and
// every test (FakeClock) run the very same decision code.
//
// Units: TimeMs is milliseconds since an arbitrary epoch (the Unix epoch for RealClock's
// NowMs, an arbitrary start for MonoMs).
//
// Two readings (Envoy's TimeSource): NowMs is wall time, for records and display; it may step
// (NTP, an operator). MonoMs never steps and never goes back: every duration, timeout and
// liveness rule is measured on it (issue 37).

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
  // Wall time in ms. Thread-safe.
  virtual TimeMs NowMs() const = 0;
  // Monotonic time in ms: never steps with the wall clock. Thread-safe.
  virtual TimeMs MonoMs() const = 0;
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

// Wall-clock time (system_clock for NowMs, steady_clock for MonoMs, NowNs and sleeping).
class RealClock final : public Clock {
 public:
  TimeMs NowMs() const override;
  TimeMs MonoMs() const override;
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

  // Wall time: the monotonic time plus every StepWallMs so far.
  TimeMs NowMs() const override { return now_ns_.load() / 1'000'000 + wall_offset_ms_.load(); }
  TimeMs MonoMs() const override { return now_ns_.load() / 1'000'000; }
  int64_t NowNs() const override { return now_ns_.load(); }
  void SleepMs(DurationMs d) override;
  // Wakes when another thread advances the clock past the deadline (AdvanceMs takes the
  // waiter's mutex before notifying, so no wake-up is lost). REQUIRES: the thread that
  // advances the clock holds none of the waiters' mutexes.
  bool WaitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, DurationMs d,
               const std::function<bool()>& pred) override;

  void AdvanceMs(DurationMs d);
  void SetMs(TimeMs t);  // REQUIRES: t >= MonoMs()
  // Steps the wall clock alone by `d` (either sign), as NTP or an operator would: NowMs moves,
  // MonoMs, sleepers and waiters do not.
  void StepWallMs(DurationMs d) { wall_offset_ms_.fetch_add(d); }
  // Number of threads currently blocked in SleepMs (lets tests wait for a quiescent state).
  int sleepers() const;

 private:
  std::atomic<int64_t> now_ns_;
  std::atomic<int64_t> wall_offset_ms_{0};
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

// Wall time that never steps: `base`'s wall time when constructed, plus `base`'s monotonic
// time since. A component that stamps records and measures durations from one reading (the
// scheduler) holds one, so a step of the system clock changes none of its durations; its
// records then differ from the system clock by the step until the process restarts (they
// are the wall time of its start plus the time elapsed). Sleeping and waiting are `base`'s.
// Thread-safe.
class SteadyWallClock final : public Clock {
 public:
  explicit SteadyWallClock(Clock& base)
      : base_(base), wall_at_start_(base.NowMs()), mono_at_start_(base.MonoMs()) {}

  TimeMs NowMs() const override { return wall_at_start_ + (base_.MonoMs() - mono_at_start_); }
  TimeMs MonoMs() const override { return base_.MonoMs(); }
  int64_t NowNs() const override { return base_.NowNs(); }
  void SleepMs(DurationMs d) override { base_.SleepMs(d); }
  bool WaitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, DurationMs d,
               const std::function<bool()>& pred) override {
    return base_.WaitFor(lock, cv, d, pred);
  }
  Clock& base() { return base_; }

 private:
  Clock& base_;
  const TimeMs wall_at_start_;
  const TimeMs mono_at_start_;
};

}  // namespace gpusched
