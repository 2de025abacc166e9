// `gpusched bench scale --agents N --pending P` (issue 43): a server holding P pending tasks.
//   1. N simulated agents connect; N x 8 one-GPU blockers (noop, running a day) fill every GPU;
//   2. P one-GPU tasks are submitted as job arrays of 10,000 (`submit_seconds`), and wait;
//   3. with them waiting: the server's RSS (`kib_per_pending_task` against the RSS before
//      them), its CPU over --idle-seconds, the pass time while blockers are cancelled one at a
//      time, at most a quarter of them (each frees a GPU: a pass places one waiting task), the
//      latency of a page of `ls` (ListTasks, 100 pending tasks: the first page and one from
//      the middle), of the REST page GET /api/v1/tasks?state=pending&limit=100, and of `why`
//      of a waiting task;
//   4. restart: the server is killed (SIGKILL) and started on the same SQLite file:
//      `restart_answer_seconds` until it answers (it restores every live task first) and
//      `restart_seconds` until a page of pending tasks, then a fresh fleet of the same nodes
//      (`reconnect_seconds`; their blockers are re-placed: the new agents run nothing);
//   5. drain: the blockers are cancelled by 32 concurrent callers (`cancel_seconds`); every
//      task runs (1 ms each) until none is live: `drain_seconds` from the first cancel, tasks
//      per second, and `succeeded` counted from the server's records.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <functional>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "base/percentile.h"
#include "cli/bench_scale.h"
#include "cli/e2e_driver.h"
#include "cli/usage_errors.h"
#include "rpc/convert.h"

namespace gpusched::cli::scale {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::gpusched::v1;
using SteadyClock = std::chrono::steady_clock;

constexpr int64_t kArray = 10'000;  // core::kMaxArrayTasks
constexpr int kSamples = 20;        // calls timed per latency figure
constexpr size_t kCancelThreads = 32;  // concurrent callers cancelling the blockers

std::unique_ptr<v1::Scheduler::Stub> Stub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  return v1::Scheduler::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

grpc::Status Call(const std::function<grpc::Status(grpc::ClientContext&)>& call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(2));
  return call(ctx);
}

// `count` one-GPU tasks of `run_ms` as arrays; their ids, in order.
std::vector<uint64_t> SubmitArrays(v1::Scheduler::Stub& stub, int64_t count, int64_t run_ms,
                                   const std::string& name) {
  core::TaskSpec spec;
  spec.name = name;
  spec.gpus = 1;
  spec.command = {"true"};
  spec.duration_ms = run_ms;
  v1::SubmitRequest req;
  rpc::TaskSpecToProto(spec, req.mutable_spec());
  std::vector<uint64_t> ids;
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min(kArray, count - done);
    req.mutable_array()->set_first(0);
    req.mutable_array()->set_last(n - 1);
    v1::SubmitResponse resp;
    const grpc::Status s = Call([&](grpc::ClientContext& c) { return stub.Submit(&c, req, &resp); });
    if (!s.ok()) Fail(Unavailable("bench scale: submitting an array: " + s.error_message()));
    ids.insert(ids.end(), resp.ids().begin(), resp.ids().end());
    done += n;
  }
  return ids;
}

// Whether any task is in `state`.
bool AnyIn(v1::Scheduler::Stub& stub, const std::string& state) {
  v1::ListTasksRequest req;
  req.set_state(state);
  req.set_limit(1);
  v1::ListTasksResponse resp;
  const grpc::Status s = Call([&](grpc::ClientContext& c) { return stub.ListTasks(&c, req, &resp); });
  return !s.ok() || resp.tasks_size() > 0;
}

// Polls until no task is in any of `states` (Fail after `limit`); the seconds it took.
double WaitUntilNone(v1::Scheduler::Stub& stub, const std::vector<std::string>& states,
                     std::chrono::seconds limit) {
  const auto t0 = SteadyClock::now();
  for (;;) {
    bool any = false;
    for (const std::string& state : states) any = any || AnyIn(stub, state);
    if (!any) break;
    if (SteadyClock::now() - t0 > limit) Fail(Unavailable("bench scale: tasks still live"));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// p50 of `kSamples` timed calls of `call`, in ms; Fail when one fails.
double LatencyP50Ms(const char* what, const std::function<bool()>& call) {
  std::vector<double> ms;
  for (int i = 0; i < kSamples; ++i) {
    const auto t0 = SteadyClock::now();
    if (!call()) Fail(Unavailable(std::string("bench scale: ") + what + " failed"));
    ms.push_back(std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count());
  }
  return PercentileOf(ms, 50);
}

bool ListPage(v1::Scheduler::Stub& stub, uint64_t after) {
  v1::ListTasksRequest req;
  req.set_state("pending");
  req.set_after_id(after);
  req.set_limit(100);
  v1::ListTasksResponse resp;
  return Call([&](grpc::ClientContext& c) { return stub.ListTasks(&c, req, &resp); }).ok() &&
         resp.tasks_size() == 100;
}

void MeasureQueries(v1::Scheduler::Stub& stub, const ScaleServer& server,
                    const std::vector<uint64_t>& pending, nlohmann::ordered_json& j) {
  j["ls_first_page_ms"] = LatencyP50Ms("ls", [&] { return ListPage(stub, 0); });
  const uint64_t middle = pending[pending.size() / 2];
  j["ls_middle_page_ms"] = LatencyP50Ms("ls", [&] { return ListPage(stub, middle); });
  j["rest_page_ms"] = LatencyP50Ms("REST", [&] {
    const std::string body =
        HttpGetLoopback(server.http_port, "/api/v1/tasks?state=pending&limit=100");
    return body.find("\"id\"") != std::string::npos;
  });
  j["why_ms"] = LatencyP50Ms("why", [&] {
    v1::WhyRequest req;
    req.set_id(middle);
    v1::WhyResponse resp;
    return Call([&](grpc::ClientContext& c) { return stub.Why(&c, req, &resp); }).ok();
  });
}

bool AnswersAPage(v1::Scheduler::Stub& stub) {
  v1::ListTasksRequest req;
  req.set_state("pending");
  req.set_limit(100);
  v1::ListTasksResponse resp;
  return Call([&](grpc::ClientContext& c) { return stub.ListTasks(&c, req, &resp); }).ok();
}

bool Cancel(v1::Scheduler::Stub& stub, uint64_t id) {
  v1::CancelRequest req;
  req.set_id(id);
  v1::CancelResponse resp;
  return Call([&](grpc::ClientContext& c) { return stub.Cancel(&c, req, &resp); }).ok();
}

// Cancels every one of `ids` from `threads` concurrent callers: the server takes the
// cancels that arrive together into one loop round and one commit, as it would a crowd of
// users, so the drain measures the server, not one caller's round trips (issue 43: one at
// a time, each waited for a pass of ~0.5 s with a million tasks queued, and the drain ran
// at the rate of the cancels).
void CancelAll(v1::Scheduler::Stub& stub, const std::vector<uint64_t>& ids, size_t threads) {
  std::vector<std::thread> callers;
  for (size_t t = 0; t < threads; ++t) {
    callers.emplace_back([&, t] {
      for (size_t i = t; i < ids.size(); i += threads) (void)Cancel(stub, ids[i]);
    });
  }
  for (std::thread& c : callers) c.join();
}

// Cancels `n` blockers one at a time, each once the pass it caused placed a waiting task:
// the pass time with the queue full, from the server's histogram.
void MeasurePasses(v1::Scheduler::Stub& stub, const ScaleServer& server,
                   std::vector<uint64_t>& blockers, size_t n, nlohmann::ordered_json& j) {
  const std::string name = "gpusched_decision_latency_seconds";
  const auto before = HistogramBuckets(HttpGetLoopback(server.http_port, "/metrics"), name);
  for (size_t i = 0; i < n && !blockers.empty(); ++i) {
    (void)Cancel(stub, blockers.back());
    blockers.pop_back();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto after = HistogramBuckets(HttpGetLoopback(server.http_port, "/metrics"), name);
  j["pass_p50_ms"] = HistogramQuantileMs(before, after, 0.5);
  j["pass_p99_ms"] = HistogramQuantileMs(before, after, 0.99);
  j["passes_measured"] = after.empty() || before.empty() ? 0.0
                                                         : after.back().second - before.back().second;
}

// Kills the server, starts it on the same store; seconds until it answers (every live task
// restored) and a page of pending tasks, then a fresh fleet.
void Restart(const ScaleFlags& f, const std::string& dir, int agents, ScaleServer& server,
             std::unique_ptr<SimAgentFleet>& fleet, nlohmann::ordered_json& j) {
  fleet->Stop();
  fleet.reset();
  server.proc.Kill(SIGKILL);
  const auto t0 = SteadyClock::now();
  StartScaleServer(dir, f, server);
  j["restart_answer_seconds"] = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  auto stub = Stub(server.address);
  // The server answers once it restored every live task; a first page of them then.
  while (!AnswersAPage(*stub)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  j["restart_seconds"] = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  j["server_rss_mib_after_restart"] = double(ResidentKib(server.proc.pid())) / 1024.0;
  double ready = 0;
  fleet = StartFleet(f, server.address, agents, &ready);
  j["reconnect_seconds"] = ready;
}

// Tasks that succeeded, paged from the server (the finished ones from its store).
int64_t CountSucceeded(v1::Scheduler::Stub& stub) {
  int64_t n = 0;
  v1::ListTasksRequest req;
  req.set_state("succeeded");
  req.set_limit(10'000);
  for (;;) {
    v1::ListTasksResponse resp;
    if (!Call([&](grpc::ClientContext& c) { return stub.ListTasks(&c, req, &resp); }).ok()) {
      Fail(Unavailable("bench scale: listing the succeeded tasks failed"));
    }
    n += resp.tasks_size();
    if (resp.next_after_id() == 0) return n;
    req.set_after_id(resp.next_after_id());
  }
}

void FillAndQueue(const ScaleFlags& f, int agents, ScaleServer& server,
                  std::vector<uint64_t>& blockers, std::vector<uint64_t>& pending,
                  nlohmann::ordered_json& j) {
  auto stub = Stub(server.address);
  blockers = SubmitArrays(*stub, int64_t{agents} * 8, 24LL * 3600 * 1000, "blocker");
  (void)WaitUntilNone(*stub, {"pending", "assigned"}, std::chrono::minutes(5));
  const int64_t rss_before = ResidentKib(server.proc.pid());
  const auto t0 = SteadyClock::now();
  pending = SubmitArrays(*stub, f.pending, 1, "waiting");
  j["submit_seconds"] = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  const int64_t rss = ResidentKib(server.proc.pid());
  j["server_rss_mib_before_pending"] = double(rss_before) / 1024.0;
  j["server_rss_mib"] = double(rss) / 1024.0;
  j["kib_per_pending_task"] = double(rss - rss_before) / double(f.pending);
  const double cpu0 = ProcessCpuSeconds(server.proc.pid());
  std::this_thread::sleep_for(std::chrono::seconds(f.idle_seconds));
  j["server_cpu_percent_idle"] =
      100.0 * (ProcessCpuSeconds(server.proc.pid()) - cpu0) / f.idle_seconds;
}

}  // namespace

nlohmann::ordered_json RunPendingScale(const ScaleFlags& f, int agents) {
  const std::string dir = (fs::temp_directory_path() /
                           ("gpusched-bench-scale-" + std::to_string(getpid()) + "-pending"))
                              .string();
  nlohmann::ordered_json j{
      {"agents", agents}, {"gpus", agents * 8}, {"seed", f.seed}, {"pending", f.pending}};
  {
    ScaleServer server;
    StartScaleServer(dir, f, server);
    j["server_rss_mib_no_agents"] = double(ResidentKib(server.proc.pid())) / 1024.0;
    double ready = 0;
    std::unique_ptr<SimAgentFleet> fleet = StartFleet(f, server.address, agents, &ready);
    j["connect_seconds"] = ready;
    j["server_rss_mib_with_agents"] = double(ResidentKib(server.proc.pid())) / 1024.0;
    std::vector<uint64_t> blockers, pending;
    FillAndQueue(f, agents, server, blockers, pending, j);
    auto stub = Stub(server.address);
    MeasureQueries(*stub, server, pending, j);
    // At most a quarter of the blockers: the queue stays (nearly) full for the restart.
    MeasurePasses(*stub, server, blockers, std::min<size_t>(100, blockers.size() / 4), j);
    Restart(f, dir, agents, server, fleet, j);
    stub = Stub(server.address);
    const auto t0 = SteadyClock::now();
    CancelAll(*stub, blockers, kCancelThreads);
    j["cancel_seconds"] = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    (void)WaitUntilNone(*stub, {"pending", "assigned", "running"}, std::chrono::minutes(60));
    const double secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    j["drain_seconds"] = secs;
    j["drain_tasks_per_s"] = double(f.pending) / std::max(secs, 1e-9);
    j["server_rss_mib_drained"] = double(ResidentKib(server.proc.pid())) / 1024.0;
    j["succeeded"] = CountSucceeded(*stub);
    fleet->Stop();
    server.proc.Kill(SIGTERM);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return j;
}

}  // namespace gpusched::cli::scale
