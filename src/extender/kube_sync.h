#pragma once
// KubeSync: the two informers (nodes, pods) that keep a KubeCache current from a KubeApi:
// list, then watch from the list's version; a stream the server ends normally is watched
// again from the last version seen; any failure (a dropped stream, a 410 "too old", an
// error status, a failed list) is followed by a fresh list, after a backoff that doubles
// from `backoff_initial_ms` to `backoff_max_ms` while failures repeat (no wait after a 410:
// the list is the remedy). The cache keeps serving its last state meanwhile.
//
// Thread-safety: Start/Stop from one thread. Each informer runs on a thread of its own.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "base/clock.h"
#include "extender/kube_api.h"
#include "extender/kube_cache.h"

namespace gpusched::extender {

struct SyncOptions {
  DurationMs backoff_initial_ms = 200;
  DurationMs backoff_max_ms = 30'000;
  std::function<void(const std::string&)> log;  // may be empty
};

class KubeSync {
 public:
  KubeSync(KubeApi& api, KubeCache& cache, Clock& clock, SyncOptions options)
      : api_(api), cache_(cache), clock_(clock), options_(std::move(options)) {}
  ~KubeSync() { Stop(); }
  KubeSync(const KubeSync&) = delete;
  KubeSync& operator=(const KubeSync&) = delete;

  void Start();
  // Ends both informers (their watches through KubeApi::Shutdown) and joins them.
  void Stop();

  struct Stats {
    int64_t node_lists = 0, pod_lists = 0;
    int64_t node_watch_failures = 0, pod_watch_failures = 0;
  };
  Stats stats() const;

 private:
  enum class Kind { kNodes, kPods };
  void Run(Kind kind);
  // Lists and watches until a failure; returns the failure (Ok only when stopping).
  // `listed`: the list succeeded.
  Status ListAndWatch(Kind kind, bool& listed);
  // Waits `ms` of the clock or until Stop(); false when stopping.
  bool Backoff(DurationMs ms);
  void Log(const std::string& line) const {
    if (options_.log) options_.log(line);
  }

  KubeApi& api_;
  KubeCache& cache_;
  Clock& clock_;
  const SyncOptions options_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stopping_{false};
  std::thread nodes_thread_, pods_thread_;
  std::atomic<int64_t> node_lists_{0}, pod_lists_{0}, node_failures_{0}, pod_failures_{0};
};

}  // namespace gpusched::extender
