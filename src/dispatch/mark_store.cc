#include "dispatch/mark_store.h"

#include <cstring>

namespace gpusched::dispatch {

void InitMarkTable(MarkTable& t, int gpu_count, int64_t now_ns) {
  std::memset(&t, 0, sizeof(t));
  t.gpu_count = gpu_count;
  t.next_ticket = 1;
  for (int g = 0; g < gpu_count; ++g) {
    t.gpus[g].updated_ns = now_ns;
    t.gpus[g].enabled = 1;
  }
}

LocalMarkStore::LocalMarkStore(int gpu_count, Clock& clock)
    : clock_(clock), table_(std::make_unique<MarkTable>()) {
  InitMarkTable(*table_, gpu_count, clock_.NowNs());
}

Status LocalMarkStore::Lock() {
  mu_.lock();
  return Status::Ok();
}

Status LocalMarkStore::Wait(DurationMs max_ms) {
  std::unique_lock lock(mu_, std::adopt_lock);
  const uint64_t seen = generation_;
  clock_.WaitFor(lock, cv_, max_ms, [&] { return generation_ != seen; });
  lock.release();  // the caller still holds mu_
  return Status::Ok();
}

void LocalMarkStore::NotifyAll() {
  generation_++;
  cv_.notify_all();
}

SharedServiceMetrics* ClaimSharedService(SharedMetricsTable& t, const std::string& name) {
  if (name.empty() || name.size() >= static_cast<size_t>(kSharedServiceNameBytes)) return nullptr;
  SharedServiceMetrics* free_slot = nullptr;
  for (SharedServiceMetrics& s : t.services) {
    if (std::strncmp(s.name, name.c_str(), kSharedServiceNameBytes) == 0) return &s;
    if (s.name[0] == '\0' && free_slot == nullptr) free_slot = &s;
  }
  if (free_slot != nullptr) std::memcpy(free_slot->name, name.c_str(), name.size() + 1);
  return free_slot;
}

void RecordShared(SharedServiceMetrics& s, int gpu, double queue_ms, double run_ms, bool failed) {
  s.completed++;
  if (failed) s.failed++;
  s.latency[gpu].Add(queue_ms + run_ms);
  s.queue_wait[gpu].Add(queue_ms);
}

void OverlaySharedMetrics(const SharedMetricsTable& t, DispatchMetrics& m) {
  const size_t gpus = m.gpus.size();
  for (size_t i = 0; i < m.services.size(); ++i) {
    for (const SharedServiceMetrics& s : t.services) {
      if (s.name[0] == '\0' ||
          std::strncmp(s.name, m.services[i].name.c_str(), kSharedServiceNameBytes) != 0) {
        continue;
      }
      m.services[i].all_completed = s.completed;
      m.services[i].all_failed = s.failed;
      for (size_t g = 0; g < gpus; ++g) {
        m.cells[i * gpus + g].latency = s.latency[g];
        m.cells[i * gpus + g].queue_wait = s.queue_wait[g];
      }
    }
  }
}

}  // namespace gpusched::dispatch
