#include "bench/waiting_bench.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "base/check.h"
#include "base/clock.h"
#include "base/rng.h"
#include "bench/core_bench.h"
#include "core/scheduler.h"

namespace gpusched::bench {
namespace {

using core::Scheduler;

double Seconds(int64_t start_ns, int64_t end_ns) {
  return static_cast<double>(end_ns - start_ns) / 1e9;
}

// Every GPU taken by a one-GPU task that runs (the server's default configuration).
std::unique_ptr<Scheduler> MakeFullCluster(const WaitingBenchConfig& c, Clock& clock) {
  auto s = Scheduler::Create(core::SchedulerConfig{}, clock);
  GS_CHECK(s.ok());
  Scheduler& sched = **s;
  for (int64_t i = 0; i < c.nodes; ++i) {
    GS_CHECK(sched.RegisterNode(BenchNode(i, c.gpus_per_node)).ok());
  }
  for (int64_t i = 0; i < c.nodes * c.gpus_per_node; ++i) {
    core::TaskSpec spec;
    spec.name = "running-" + std::to_string(i);
    spec.gpus = 1;
    GS_CHECK(sched.Submit(spec).ok());
  }
  sched.Schedule();
  for (const core::Action& a : sched.TakeActions()) {
    GS_CHECK(a.kind == core::Action::Kind::kAssign);
    GS_CHECK(sched.TaskStarted(a.task, a.attempt).ok());
  }
  return std::move(s).value();
}

// Three waiting shapes in a seeded mix: whole GPUs (70 %) and 20 or 40 GiB shares of one.
void SubmitWaiting(Scheduler& s, const WaitingBenchConfig& c) {
  Rng rng(c.seed);
  for (int64_t i = 0; i < c.waiting; ++i) {
    core::TaskSpec spec;
    spec.name = "waiting-" + std::to_string(i);
    spec.gpus = 1;
    if (!rng.Bernoulli(0.7)) spec.gpu_mem_mib = rng.Bernoulli(0.5) ? 20 * 1024 : 40 * 1024;
    GS_CHECK(s.Submit(spec).ok());
  }
}

}  // namespace

WaitingBenchResult RunWaitingBench(const WaitingBenchConfig& c) {
  WaitingBenchResult r;
  r.config = c;
  FakeClock clock(0);  // no t1 or t2 elapses: the passes timed are release passes only
  RealClock wall;
  auto s = MakeFullCluster(c, clock);
  int64_t t0 = wall.NowNs();
  SubmitWaiting(*s, c);
  r.submit_seconds = Seconds(t0, wall.NowNs());
  t0 = wall.NowNs();
  GS_CHECK(s->Schedule() == 0);
  r.first_pass_seconds = Seconds(t0, wall.NowNs());
  r.waiting_in_fq = static_cast<int64_t>(s->FailureQueueOrder().size());
  const core::SchedulerStats before = s->stats();
  std::vector<double> ms;
  const int64_t running = c.nodes * c.gpus_per_node;
  for (int64_t k = 0; k < c.releases && k < running; ++k) {
    // The running tasks end in id order, one per pass (ids 1.. are the running tasks).
    const TaskId id(static_cast<uint64_t>(k + 1));
    GS_CHECK(s->TaskFinished(id, s->GetTask(id)->attempts, 0, 0).ok());
    t0 = wall.NowNs();
    r.placed += static_cast<int64_t>(s->Schedule());
    ms.push_back(Seconds(t0, wall.NowNs()) * 1e3);
    s->TakeActions();
  }
  GS_CHECK(s->CheckInvariants().ok());
  const core::SchedulerStats after = s->stats();
  r.decisions = after.decisions - before.decisions;
  r.memo_hits = after.memo_hits - before.memo_hits;
  r.visited = r.decisions - (after.parked_waits - before.parked_waits);
  std::sort(ms.begin(), ms.end());
  if (!ms.empty()) {
    r.release_pass_p50_ms = ms[ms.size() / 2];
    r.release_pass_max_ms = ms.back();
  }
  if (r.waiting_in_fq > 0) {
    r.ns_per_waiting_task = r.release_pass_p50_ms * 1e6 / static_cast<double>(r.waiting_in_fq);
  }
  return r;
}

void PrintWaitingBenchRow(std::ostream& out, const WaitingBenchResult& r) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "nodes=%lld waiting=%lld seed=%llu  release pass p50 %.3f ms, max %.3f ms "
                "(%.1f ns per waiting task); %lld placed, %lld decisions (%lld memo hits, %lld "
                "visited one by one) in %lld passes; submit %.2f s, first pass %.2f s\n",
                static_cast<long long>(r.config.nodes), static_cast<long long>(r.waiting_in_fq),
                static_cast<unsigned long long>(r.config.seed), r.release_pass_p50_ms,
                r.release_pass_max_ms, r.ns_per_waiting_task, static_cast<long long>(r.placed),
                static_cast<long long>(r.decisions), static_cast<long long>(r.memo_hits),
                static_cast<long long>(r.visited), static_cast<long long>(r.config.releases),
                r.submit_seconds, r.first_pass_seconds);
  out << buf << std::flush;
}

void PrintWaitingBenchJson(std::ostream& out, const std::vector<WaitingBenchResult>& results) {
  out << "[";
  for (size_t i = 0; i < results.size(); ++i) {
    const WaitingBenchResult& r = results[i];
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "%s\n  {\"nodes\": %lld, \"gpus_per_node\": %lld, \"waiting\": %lld, "
                  "\"seed\": %llu, \"releases\": %lld, \"placed\": %lld, \"decisions\": %lld, "
                  "\"memo_hits\": %lld, \"visited\": %lld, \"release_pass_p50_ms\": %.3f, "
                  "\"release_pass_max_ms\": %.3f, \"ns_per_waiting_task\": %.1f, "
                  "\"submit_seconds\": %.3f, \"first_pass_seconds\": %.3f}",
                  i == 0 ? "" : ",", static_cast<long long>(r.config.nodes),
                  static_cast<long long>(r.config.gpus_per_node),
                  static_cast<long long>(r.waiting_in_fq),
                  static_cast<unsigned long long>(r.config.seed),
                  static_cast<long long>(r.config.releases), static_cast<long long>(r.placed),
                  static_cast<long long>(r.decisions), static_cast<long long>(r.memo_hits),
                  static_cast<long long>(r.visited), r.release_pass_p50_ms,
                  r.release_pass_max_ms, r.ns_per_waiting_task, r.submit_seconds,
                  r.first_pass_seconds);
    out << buf;
  }
  out << "\n]\n";
}

}  // namespace gpusched::bench
