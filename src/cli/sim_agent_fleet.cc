#include "cli/sim_agent_fleet.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <queue>
#include <random>
#include <thread>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "base/thread_name.h"
#include "gpusched/v1/gpusched.grpc.pb.h"

namespace gpusched::cli {
// The fleet's parts, named (not anonymous) because SimAgentFleet::Impl holds them.
namespace sim_fleet {

namespace v1 = ::gpusched::v1;
using Clock = std::chrono::steady_clock;
using Key = std::pair<uint64_t, int64_t>;  // task id, attempt

// The fleet's probe target: a loopback listener that accepts and closes, on a thread.
class ProbeListener {
 public:
  ~ProbeListener() { Stop(); }
  Status Start() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd_, 4096) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return Internal("bench scale: cannot listen on 127.0.0.1 for the probe daemon");
    }
    address_ = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    thread_ = std::thread([this] { Serve(); });
    return Status::Ok();
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  const std::string& address() const { return address_; }

 private:
  void Serve() {
    NameThisThread("gs-sim-probe");
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) close(c);
    }
  }
  int fd_ = -1;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

enum class Op { kStart, kRead, kWrite, kFinish };
struct SimAgent;
struct Tag {
  SimAgent* agent;
  Op op;
};

struct Running {
  std::vector<int32_t> gpus;
  std::vector<int64_t> mem_mib;
};

struct SimAgent {
  std::string name;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::AgentLink::Stub> stub;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::AgentMessage, v1::ServerMessage>> stream;
  v1::ServerMessage in;
  std::deque<v1::AgentMessage> outbox;  // front is being written while `writing`
  bool writing = false;
  bool reading = false;
  bool finishing = false;  // Finish asked: the stream is over
  bool finished = false;   // ... and answered
  grpc::Status status;
  std::vector<int64_t> allocated_mib;  // per GPU
  std::map<Key, Running> running;
  std::map<Key, Clock::time_point> awaiting_ack;
  Tag tags[4];
};

enum class TimerKind { kNodeHeartbeat, kTaskHeartbeat, kTaskEnd };
struct Timer {
  Clock::time_point due;
  SimAgent* agent;
  TimerKind kind;
  Key task;
  Clock::duration period;  // heartbeats: the next one is due this long after
  bool operator>(const Timer& o) const { return due > o.due; }
};

// Counters shared by the driver threads.
struct FleetShared {
  std::atomic<int64_t> registered{0}, heartbeats{0}, task_heartbeats{0}, assigned{0},
      finished{0}, killed{0}, streams_ended{0};
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::vector<double> ack_lags_ms;  // guarded by mu
};

// One completion queue, its thread and its share of the agents.
class FleetDriver {
 public:
  FleetDriver(const SimFleetOptions& o, FleetShared& shared, uint64_t seed,
              std::string probe_address)
      : o_(o), shared_(shared), rng_(seed), probe_address_(std::move(probe_address)) {}

  void Add(std::unique_ptr<SimAgent> a) { agents_.push_back(std::move(a)); }
  void Run() {
    NameThisThread("gs-sim-agents");
    for (auto& a : agents_) Connect(*a);
    while (!AllFinished()) {
      void* tag = nullptr;
      bool ok = false;
      const auto wait = std::min(NextDue() - Clock::now(), Clock::duration(std::chrono::milliseconds(50)));
      const auto deadline = std::chrono::system_clock::now() +
                            std::chrono::duration_cast<std::chrono::system_clock::duration>(wait);
      const auto got = cq_.AsyncNext(&tag, &ok, deadline);
      if (got == grpc::CompletionQueue::SHUTDOWN) break;
      if (got == grpc::CompletionQueue::GOT_EVENT) {
        Tag& t = *static_cast<Tag*>(tag);
        Handle(t, ok);
        // Stopping: a stream whose read was answered with a message ends here.
        if (shared_.stopping && !t.agent->reading) EndStream(*t.agent);
      }
      if (!shared_.stopping) FireDueTimers();
    }
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  void CancelAll() {
    for (auto& a : agents_) a->ctx.TryCancel();
  }

 private:
  bool AllFinished() const {
    if (!shared_.stopping) return false;
    for (const auto& a : agents_) {
      if (!a->finished || a->writing || a->reading) return false;
    }
    return true;
  }
  Clock::time_point NextDue() const {
    return timers_.empty() ? Clock::now() + std::chrono::seconds(1) : timers_.top().due;
  }

  void Connect(SimAgent& a) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    a.channel = grpc::CreateCustomChannel(o_.server, grpc::InsecureChannelCredentials(), args);
    a.stub = v1::AgentLink::NewStub(a.channel);
    for (int op = 0; op < 4; ++op) a.tags[op] = Tag{&a, Op(op)};
    a.allocated_mib.assign(size_t(o_.gpus), 0);
    a.stream = a.stub->PrepareAsyncConnect(&a.ctx, &cq_);
    a.stream->StartCall(&a.tags[int(Op::kStart)]);
  }

  void Handle(Tag& tag, bool ok) {
    SimAgent& a = *tag.agent;
    switch (tag.op) {
      case Op::kStart:
        if (!ok) return EndStream(a);
        Send(a, RegisterMessage(a));
        return Read(a);
      case Op::kRead:
        a.reading = false;
        if (!ok) return EndStream(a);
        OnServerMessage(a);
        return Read(a);
      case Op::kWrite:
        a.writing = false;
        if (!ok) {
          a.outbox.clear();
          return;
        }
        a.outbox.pop_front();
        return WriteNext(a);
      case Op::kFinish:
        a.finished = true;
        if (!shared_.stopping) ++shared_.streams_ended;
        return;
    }
  }

  void EndStream(SimAgent& a) {
    if (a.finishing) return;
    a.finishing = true;
    a.stream->Finish(&a.status, &a.tags[int(Op::kFinish)]);
  }
  void Read(SimAgent& a) {
    if (a.finishing || shared_.stopping) return;
    a.reading = true;
    a.stream->Read(&a.in, &a.tags[int(Op::kRead)]);
  }
  void Send(SimAgent& a, v1::AgentMessage m) {
    if (a.finishing) return;
    a.outbox.push_back(std::move(m));
    WriteNext(a);
  }
  void WriteNext(SimAgent& a) {
    if (a.writing || a.outbox.empty() || a.finishing) return;
    a.writing = true;
    a.stream->Write(a.outbox.front(), &a.tags[int(Op::kWrite)]);
  }

  v1::AgentMessage RegisterMessage(const SimAgent& a) {
    v1::AgentMessage m;
    v1::RegisterNode& r = *m.mutable_register_();
    r.set_name(a.name);
    r.set_address(probe_address_);
    r.set_cpu_milli(int64_t{o_.gpus} * 8'000);
    r.set_mem_mib(int64_t{o_.gpus} * 128 * 1024);
    r.set_simulated(true);
    r.set_agent_instance(a.name + "-" + std::to_string(rng_()));
    for (int g = 0; g < o_.gpus; ++g) {
      v1::Gpu& gpu = *r.add_gpus();
      gpu.set_index(g);
      gpu.set_model("SimGPU-80GB");
      gpu.set_total_mib(o_.gpu_mib);
    }
    return m;
  }

  void OnServerMessage(SimAgent& a) {
    const v1::ServerMessage& m = a.in;
    if (m.has_registered()) return OnRegistered(a, m.registered());
    if (m.has_assign()) return OnAssign(a, m.assign());
    if (m.has_kill()) {
      ++shared_.killed;
      return EndTask(a, {m.kill().id(), m.kill().attempt()}, 137, "killed");
    }
    if (m.has_ack()) {
      auto it = a.awaiting_ack.find({m.ack().id(), m.ack().attempt()});
      if (it == a.awaiting_ack.end()) return;
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - it->second).count();
      a.awaiting_ack.erase(it);
      std::lock_guard lock(shared_.mu);
      shared_.ack_lags_ms.push_back(ms);
    }
  }

  void OnRegistered(SimAgent& a, const v1::Registered& r) {
    ++shared_.registered;
    const auto now = Clock::now();
    const auto every = [&](int64_t ms, TimerKind kind) {
      if (ms <= 0) return;
      const auto period = std::chrono::milliseconds(ms);
      const auto offset = std::chrono::milliseconds(int64_t(rng_() % uint64_t(ms)));
      timers_.push(Timer{now + offset, &a, kind, {}, period});
    };
    every(r.node_heartbeat_ms(), TimerKind::kNodeHeartbeat);
    every(r.task_heartbeat_ms(), TimerKind::kTaskHeartbeat);
  }

  void OnAssign(SimAgent& a, const v1::Assign& as) {
    ++shared_.assigned;
    const Key key{as.id(), as.attempt()};
    Running run;
    for (int i = 0; i < as.gpus_size(); ++i) {
      const int32_t g = as.gpus(i);
      const int64_t mib = i < as.gpu_mem_mib_size() ? as.gpu_mem_mib(i) : o_.gpu_mib;
      run.gpus.push_back(g);
      run.mem_mib.push_back(mib);
      if (g >= 0 && g < o_.gpus) a.allocated_mib[size_t(g)] += mib;
    }
    a.running[key] = std::move(run);
    v1::AgentMessage started;
    started.mutable_status()->set_id(key.first);
    started.mutable_status()->set_attempt(key.second);
    started.mutable_status()->set_kind(v1::TaskStatus::STARTED);
    Send(a, std::move(started));
    const auto run_for = std::chrono::milliseconds(as.has_duration_ms() ? as.duration_ms() : 0);
    timers_.push(Timer{Clock::now() + run_for, &a, TimerKind::kTaskEnd, key, {}});
  }

  // FINISHED for `key` if it still runs, timed until its acknowledgement.
  void EndTask(SimAgent& a, Key key, int exit_code, const char* reason) {
    auto it = a.running.find(key);
    if (it == a.running.end()) return;
    for (size_t i = 0; i < it->second.gpus.size(); ++i) {
      const int32_t g = it->second.gpus[i];
      if (g >= 0 && g < o_.gpus) a.allocated_mib[size_t(g)] -= it->second.mem_mib[i];
    }
    a.running.erase(it);
    v1::AgentMessage done;
    v1::TaskStatus& s = *done.mutable_status();
    s.set_id(key.first);
    s.set_attempt(key.second);
    s.set_kind(v1::TaskStatus::FINISHED);
    s.set_exit_code(exit_code);
    s.set_reason(reason);
    s.set_finished_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count());
    a.awaiting_ack[key] = Clock::now();
    ++shared_.finished;
    Send(a, std::move(done));
  }

  void FireDueTimers() {
    const auto now = Clock::now();
    while (!timers_.empty() && timers_.top().due <= now) {
      Timer t = timers_.top();
      timers_.pop();
      if (t.agent->finishing) continue;
      if (t.kind == TimerKind::kTaskEnd) {
        EndTask(*t.agent, t.task, 0, "");
        continue;
      }
      t.kind == TimerKind::kNodeHeartbeat ? NodeHeartbeat(*t.agent) : TaskHeartbeat(*t.agent);
      t.due += t.period;
      timers_.push(t);
    }
  }

  void NodeHeartbeat(SimAgent& a) {
    v1::AgentMessage m;
    v1::NodeHeartbeat& hb = *m.mutable_heartbeat();
    for (int64_t used : a.allocated_mib) hb.add_gpu_free_mib(std::max<int64_t>(0, o_.gpu_mib - used));
    for (const auto& [key, run] : a.running) {
      v1::TaskRef& ref = *hb.add_running();
      ref.set_id(key.first);
      ref.set_attempt(key.second);
    }
    ++shared_.heartbeats;
    Send(a, std::move(m));
  }

  void TaskHeartbeat(SimAgent& a) {
    if (a.running.empty()) return;
    v1::AgentMessage m;
    for (const auto& [key, run] : a.running) {
      v1::TaskRef& ref = *m.mutable_task_heartbeats()->add_tasks();
      ref.set_id(key.first);
      ref.set_attempt(key.second);
    }
    ++shared_.task_heartbeats;
    Send(a, std::move(m));
  }

  const SimFleetOptions& o_;
  FleetShared& shared_;
  std::mt19937_64 rng_;
  const std::string probe_address_;
  grpc::CompletionQueue cq_;
  std::vector<std::unique_ptr<SimAgent>> agents_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
};

}  // namespace sim_fleet

using sim_fleet::FleetDriver;
using sim_fleet::FleetShared;
using sim_fleet::ProbeListener;
using sim_fleet::SimAgent;

struct SimAgentFleet::Impl {
  SimFleetOptions options;
  ProbeListener probe;
  FleetShared shared;
  std::vector<std::unique_ptr<FleetDriver>> drivers;
  std::vector<std::thread> threads;
};

SimAgentFleet::SimAgentFleet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SimAgentFleet::~SimAgentFleet() { Stop(); }

StatusOr<std::unique_ptr<SimAgentFleet>> SimAgentFleet::Start(const SimFleetOptions& options) {
  if (options.agents < 1 || options.threads < 1 || options.gpus < 1) {
    return InvalidArgument("bench scale: agents, threads and gpus must be >= 1");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  GS_RETURN_IF_ERROR(impl->probe.Start());
  for (int t = 0; t < options.threads; ++t) {
    impl->drivers.push_back(
        std::make_unique<FleetDriver>(impl->options, impl->shared, options.seed + uint64_t(t),
                                      impl->probe.address()));
  }
  for (int i = 0; i < options.agents; ++i) {
    auto a = std::make_unique<SimAgent>();
    char name[32];
    std::snprintf(name, sizeof name, "%05d", i + 1);
    a->name = options.name_prefix + name;
    impl->drivers[size_t(i % options.threads)]->Add(std::move(a));
  }
  for (auto& d : impl->drivers) impl->threads.emplace_back([driver = d.get()] { driver->Run(); });
  return std::unique_ptr<SimAgentFleet>(new SimAgentFleet(std::move(impl)));
}

SimFleetCounters SimAgentFleet::Counters() const {
  const FleetShared& s = impl_->shared;
  return SimFleetCounters{s.registered, s.heartbeats, s.task_heartbeats, s.assigned,
                          s.finished,   s.killed,     s.streams_ended};
}

std::vector<double> SimAgentFleet::TakeAckLags() {
  std::lock_guard lock(impl_->shared.mu);
  return std::exchange(impl_->shared.ack_lags_ms, {});
}

void SimAgentFleet::Stop() {
  if (impl_->shared.stopping.exchange(true)) return;
  for (auto& d : impl_->drivers) d->CancelAll();
  for (auto& t : impl_->threads) t.join();
  impl_->probe.Stop();
}

}  // namespace gpusched::cli
