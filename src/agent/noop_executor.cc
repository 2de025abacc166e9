#include "agent/noop_executor.h"

#include <algorithm>

#include "base/thread_name.h"

namespace gpusched::agent {
namespace {

// How long the thread waits when no task runs (it is woken by the next launch anyway).
constexpr DurationMs kIdleWaitMs = 60'000;

}  // namespace

NoopExecutor::NoopExecutor(Clock& clock, ExitCallback on_exit)
    : clock_(clock), on_exit_(std::move(on_exit)), thread_([this] {
        NameThisThread("gs-noop-timer");
        Loop();
      }) {}

NoopExecutor::~NoopExecutor() { Stop(ShutdownMode::kKillTasks); }

Status NoopExecutor::Launch(const LaunchSpec& spec) {
  const TaskKey key{spec.id, spec.attempt};
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) return Unavailable("agent is shutting down");
  auto [it, inserted] = running_.try_emplace(key);
  if (!inserted) {
    return AlreadyExists("task " + std::to_string(spec.id) + " attempt " +
                         std::to_string(spec.attempt) + " is already running");
  }
  it->second.exit = TaskExit{spec.id, spec.attempt, 0, ""};
  const bool earliest =
      Schedule(key, it->second, clock_.NowMs() + std::max<DurationMs>(spec.duration_ms, 0));
  lock.unlock();
  if (earliest) cv_.notify_one();  // unlocked: the thread it wakes takes mu_ at once
  return Status::Ok();
}

void NoopExecutor::Kill(uint64_t id, int64_t attempt, DurationMs /*grace_ms*/,
                        const std::string& reason) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = running_.find({id, attempt});
  if (it == running_.end() || it->second.killed) return;
  it->second.killed = true;
  it->second.exit.exit_code = 128 + 9;
  it->second.exit.reason = "killed: " + reason;
  const bool earliest = Schedule(it->first, it->second, clock_.NowMs());
  lock.unlock();
  if (earliest) cv_.notify_one();
}

bool NoopExecutor::Schedule(const TaskKey& key, Task& task, TimeMs at_ms) {
  task.seq = next_seq_++;
  const bool earliest = deadlines_.empty() || at_ms < deadlines_.top().at_ms;
  deadlines_.push({at_ms, task.seq, key});
  if (earliest) ++generation_;
  return earliest;
}

std::vector<TaskKey> NoopExecutor::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TaskKey> out = KeysOf(running_);
  out.insert(out.end(), settling_.begin(), settling_.end());
  std::sort(out.begin(), out.end());
  return out;
}

void NoopExecutor::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<TaskExit> due;
  while (!stop_) {
    const TimeMs now = clock_.NowMs();
    while (!deadlines_.empty() && deadlines_.top().at_ms <= now) {
      const Deadline d = deadlines_.top();
      deadlines_.pop();
      auto it = running_.find(d.key);
      if (it == running_.end() || it->second.seq != d.seq) continue;  // superseded by Kill
      due.push_back(std::move(it->second.exit));
      settling_.insert(it->first);
      running_.erase(it);
    }
    if (!due.empty()) {
      lock.unlock();  // the callback takes the agent's locks
      for (const TaskExit& e : due) on_exit_(e);
      lock.lock();
      for (const TaskExit& e : due) settling_.erase({e.id, e.attempt});
      due.clear();
      continue;
    }
    const DurationMs wait = deadlines_.empty() ? kIdleWaitMs : deadlines_.top().at_ms - now;
    const uint64_t seen = generation_;
    clock_.WaitFor(lock, cv_, wait, [&] { return stop_ || generation_ != seen; });
  }
}

void NoopExecutor::Stop(ShutdownMode /*mode*/) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
    ++generation_;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  running_.clear();
  deadlines_ = {};
}

}  // namespace gpusched::agent
