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

}  // namespace gpusched::dispatch
