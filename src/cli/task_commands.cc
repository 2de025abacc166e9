// Client commands about tasks: submit, ls, show, logs, cancel, why.

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "base/rng.h"
#include "base/units.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "rpc/convert.h"
#include "spec/spec_yaml.h"

namespace gpusched::cli {
namespace {

uint64_t ParseId(const std::string& text) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v > 0) return static_cast<uint64_t>(v);
  } catch (const std::exception&) {  // stoll: not a number
  }
  Fail(InvalidArgument("id: \"" + text + "\" is not a task id (a number >= 1)"));
}

template <typename T>
T OrFail(StatusOr<T> v) {
  if (!v.ok()) Fail(v.status());
  return std::move(v).value();
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct SubmitFlags {
  ClientFlags client;
  std::string gpus, gpu_mem, cpu, mem, duration, name, retries, file, idempotency_key;
  std::vector<std::string> command;
};

// A key per invocation: the retries below (and a user re-running the same command with
// --idempotency-key) never create a second task.
std::string FreshIdempotencyKey() {
  char buf[40];
  std::snprintf(buf, sizeof buf, "cli-%016llx%016llx",
                static_cast<unsigned long long>(Rng::FreshSeed()),
                static_cast<unsigned long long>(Rng::FreshSeed()));
  return buf;
}

// Submits, retrying with the same idempotency key while the server is unreachable or could
// not store the task (both leave no task behind, so a retry cannot duplicate it).
Status SubmitWithRetries(Client& c, const v1::SubmitRequest& req, v1::SubmitResponse& resp) {
  Status s = Status::Ok();
  for (int attempt = 0; attempt < 3; ++attempt) {  // 0.6 s of retries in all
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100 << attempt));
    s = c.Call([&](grpc::ClientContext& ctx) { return c.stub().Submit(&ctx, req, &resp); });
    if (s.code() != StatusCode::kUnavailable && s.code() != StatusCode::kNotStored) return s;
    // The call already waited for an election that did not come (etcd down): say so now.
    if (s.message().rfind("no leader among", 0) == 0) return s;
  }
  if (s.code() == StatusCode::kNotStored) {
    return NotStored("the server could not store the task: " + s.message() +
                     " (nothing was queued; run the same command again, or check the "
                     "server's data directory)");
  }
  return s;
}

// Builds the spec: the file (-f) first, then every flag given explicitly on top of it.
core::TaskSpec BuildSpec(const SubmitFlags& f, CLI::App* cmd) {
  core::TaskSpec s;
  if (!f.file.empty()) {
    std::ifstream in(f.file);
    if (!in) Fail(InvalidArgument("-f: cannot read " + f.file));
    std::stringstream text;
    text << in.rdbuf();
    s = OrFail(spec::ParseTaskSpecYaml(text.str(), f.file));
  }
  auto integer = [](const std::string& v, const char* field) -> int64_t {
    try {
      size_t used = 0;
      const long long n = std::stoll(v, &used);
      if (used == v.size() && n >= 0) return n;
    } catch (const std::exception&) {  // stoll: not a number
    }
    Fail(InvalidArgument(std::string(field) + ": \"" + v + "\" is not a whole number >= 0"));
  };
  if (cmd->count("--gpus")) s.gpus = integer(f.gpus, "--gpus");
  if (cmd->count("--gpu-mem")) s.gpu_mem_mib = OrFail(ParseSizeMiB(f.gpu_mem, "--gpu-mem"));
  if (cmd->count("--cpu")) {
    try {
      size_t used = 0;
      const double cores = std::stod(f.cpu, &used);
      if (used != f.cpu.size() || cores < 0) throw std::invalid_argument("cpu");
      s.resources.cpu_milli = static_cast<int64_t>(cores * 1000);
    } catch (const std::exception&) {  // stod: not a number
      Fail(InvalidArgument("--cpu: \"" + f.cpu + "\" is not a number of cores"));
    }
  }
  if (cmd->count("--mem")) s.resources.mem_mib = OrFail(ParseSizeMiB(f.mem, "--mem"));
  if (cmd->count("--duration")) s.duration_ms = OrFail(ParseDurationMs(f.duration, "--duration"));
  if (cmd->count("--name")) s.name = f.name;
  if (cmd->count("--retries")) s.max_retries = integer(f.retries, "--retries");
  if (!f.command.empty()) s.command = f.command;
  if (s.command.empty()) {
    Fail(InvalidArgument("command: missing; write it after --, e.g. "
                         "gpusched submit --gpus 1 -- python train.py"));
  }
  return s;
}

void RegisterSubmit(CLI::App& app) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* cmd = app.add_subcommand("submit", "Submit a task; prints its id");
  AddClientFlags(cmd, f->client);
  cmd->add_option("--gpus", f->gpus, "GPUs (whole GPUs unless --gpu-mem is given)");
  cmd->add_option("--gpu-mem", f->gpu_mem, "GPU memory per GPU, e.g. 6GiB (shares a GPU)");
  cmd->add_option("--cpu", f->cpu, "CPU cores");
  cmd->add_option("--mem", f->mem, "RAM, e.g. 4GiB");
  cmd->add_option("--duration", f->duration, "Expected run time, e.g. 2h (for its priority)");
  cmd->add_option("--name", f->name, "Task name");
  cmd->add_option("--retries", f->retries, "Execution failures tolerated (default FAIL_MAX)");
  cmd->add_option("-f,--file", f->file, "Task spec YAML");
  cmd->add_option("--idempotency-key", f->idempotency_key,
                  "A retried submit with the same key returns the first task instead of a "
                  "new one (default: a fresh key per invocation)");
  cmd->add_option("command", f->command, "-- COMMAND [ARG...]");
  cmd->callback([f, cmd] {
    core::TaskSpec spec = BuildSpec(*f, cmd);
    Client c(f->client.server);
    v1::SubmitRequest req;
    rpc::TaskSpecToProto(spec, req.mutable_spec());
    req.set_idempotency_key(f->idempotency_key.empty() ? FreshIdempotencyKey()
                                                       : f->idempotency_key);
    v1::SubmitResponse resp;
    Status s = SubmitWithRetries(c, req, resp);
    if (!s.ok()) Fail(s);
    if (f->client.json) {
      std::cout << nlohmann::json{{"id", resp.id()}}.dump() << "\n";
    } else {
      std::cout << resp.id() << "\n";
    }
  });
}

void RegisterLs(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto state = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("ls", "List tasks");
  AddClientFlags(cmd, *flags);
  cmd->add_option("--state", *state, "Only tasks in this state (pending, running, ...)");
  cmd->callback([flags, state] {
    if (!state->empty()) (void)OrFail(rpc::TaskStateFromName(*state, "--state"));
    Client c(flags->server);
    v1::ListTasksResponse resp;  // every page, in id order
    for (uint64_t after = 0;;) {
      v1::ListTasksRequest req;
      req.set_state(*state);
      req.set_after_id(after);
      v1::ListTasksResponse page;
      Status s =
          c.Call([&](grpc::ClientContext& ctx) { return c.stub().ListTasks(&ctx, req, &page); });
      if (!s.ok()) Fail(s);
      for (v1::Task& t : *page.mutable_tasks()) *resp.add_tasks() = std::move(t);
      if (page.next_after_id() == 0) break;
      after = page.next_after_id();
    }
    if (flags->json) {
      nlohmann::json a = nlohmann::json::array();
      for (const v1::Task& t : resp.tasks()) a.push_back(TaskJson(t));
      std::cout << a.dump() << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows{
        {"ID", "NAME", "STATE", "NODE", "GPUS", "EXIT", "ATTEMPTS", "REASON"}};
    for (const v1::Task& t : resp.tasks()) {
      rows.push_back({std::to_string(t.id()), t.name().empty() ? "-" : t.name(),
                      t.idle() ? t.state() + " (idle)" : t.state(),
                      t.node().empty() ? "-" : t.node(),
                      t.gpus_size() ? JoinInts(t.gpus()) : "-",
                      t.has_exit_code() ? std::to_string(t.exit_code()) : "-",
                      std::to_string(t.attempts()), t.reason()});
    }
    PrintTable(std::cout, rows);
  });
}

v1::Task GetTask(Client& c, uint64_t id) {
  v1::GetTaskRequest req;
  req.set_id(id);
  v1::Task t;
  Status s = c.Call([&](grpc::ClientContext& ctx) { return c.stub().GetTask(&ctx, req, &t); });
  if (!s.ok()) Fail(s);
  return t;
}

void RegisterShow(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto id = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("show", "Show one task in full");
  AddClientFlags(cmd, *flags);
  cmd->add_option("ID", *id, "Task id")->required();
  cmd->callback([flags, id] {
    const uint64_t task = ParseId(*id);
    Client c(flags->server);
    const v1::Task t = GetTask(c, task);
    if (flags->json) {
      std::cout << TaskJson(t).dump(2) << "\n";
      return;
    }
    const int64_t now = NowMs();
    std::string cmdline;
    for (const std::string& a : t.spec().command()) cmdline += (cmdline.empty() ? "" : " ") + a;
    PrintTable(std::cout,
               {{"id:", std::to_string(t.id())},
                {"name:", t.name().empty() ? "-" : t.name()},
                {"state:", t.state()},
                {"reason:", t.reason()},
                {"command:", cmdline},
                {"node:", t.node().empty() ? "-" : t.node()},
                {"gpus:", (t.gpus_size() ? JoinInts(t.gpus()) : "-") +
                              (t.topology_rule().empty() ? "" : " (" + t.topology_rule() + ")")},
                {"gpu memory:", t.gpu_mem_need_mib() ? FormatSizeMiB(t.gpu_mem_need_mib()) +
                                                           " per GPU (" + t.mem_source() + ")"
                                                     : t.mem_source()},
                {"exit code:", t.has_exit_code() ? std::to_string(t.exit_code()) : "-"},
                {"attempts:", std::to_string(t.attempts())},
                {"failures:", std::to_string(t.fail_cnt())},
                {"priority:", "Pt " + std::to_string(t.pt()) + " (St " + std::to_string(t.st()) +
                                  ")"},
                {"submitted:", Age(t.submitted_ms(), now)},
                {"finished:", Age(t.finished_ms(), now)}});
    if (t.has_gpu_util()) {  // CN109992422A claim 7: the executor's status
      const std::string since = "0 % since " + Age(t.idle_since_ms(), now);
      PrintTable(std::cout, {{"gpu use:", std::to_string(t.gpu_util()) + " %, " +
                                              FormatSizeMiB(t.gpu_mem_used_mib()) + " held"},
                             {"idle:", t.idle()               ? "yes (" + since + ")"
                                       : t.gpu_util() == 0 ? "not yet (" + since + ")"
                                                           : "no"}});
    }
    std::cout << "history:\n";
    for (const auto& h : t.history()) {
      std::cout << "  " << Age(h.at_ms(), now) << "  " << h.state() << "  " << h.reason() << "\n";
    }
  });
}

void RegisterLogs(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto id = std::make_shared<std::string>();
  auto follow = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("logs", "Print a task's output (latest attempt)");
  AddClientFlags(cmd, *flags, false);
  cmd->add_option("ID", *id, "Task id")->required();
  cmd->add_flag("-f,--follow", *follow, "Keep printing until the task ends");
  cmd->callback([flags, id, follow] {
    const uint64_t task = ParseId(*id);
    Client c(flags->server);
    int64_t offset = 0, attempt = -1;
    for (;;) {
      v1::LogsRequest req;
      req.set_id(task);
      req.set_offset(offset);
      v1::LogsResponse resp;
      Status s = c.Call([&](grpc::ClientContext& ctx) { return c.stub().Logs(&ctx, req, &resp); });
      if (!s.ok()) Fail(s);
      if (attempt >= 0 && resp.attempt() != attempt) {  // a retry started: its log is new
        offset = 0;
        attempt = resp.attempt();
        std::cout << "--- attempt " << attempt << " ---\n";
        continue;
      }
      attempt = resp.attempt();
      std::cout << resp.data() << std::flush;
      offset = resp.next_offset();
      if (!resp.data().empty()) continue;  // drain what is there
      if (!*follow || resp.task_done()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // follow: poll period
    }
  });
}

void RegisterCancel(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto id = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("cancel", "Cancel a task (kills it if running)");
  AddClientFlags(cmd, *flags);
  cmd->add_option("ID", *id, "Task id")->required();
  cmd->callback([flags, id] {
    v1::CancelRequest req;
    req.set_id(ParseId(*id));
    Client c(flags->server);
    v1::CancelResponse resp;
    Status s = c.Call([&](grpc::ClientContext& ctx) { return c.stub().Cancel(&ctx, req, &resp); });
    if (!s.ok()) Fail(s);
    if (flags->json) {
      std::cout << TaskJson(resp.task()).dump() << "\n";
    } else {
      std::cout << "task " << req.id() << " cancelled\n";
    }
  });
}

void RegisterWhy(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto id = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("why", "Explain where a task runs or why it waits");
  AddClientFlags(cmd, *flags);
  cmd->add_option("ID", *id, "Task id")->required();
  cmd->callback([flags, id] {
    v1::WhyRequest req;
    req.set_id(ParseId(*id));
    Client c(flags->server);
    v1::WhyResponse w;
    Status s = c.Call([&](grpc::ClientContext& ctx) { return c.stub().Why(&ctx, req, &w); });
    if (!s.ok()) Fail(s);
    if (flags->json) {
      nlohmann::json j = WhyJson(w);
      std::cout << j.dump() << "\n";
      return;
    }
    std::cout << "task " << w.id() << " is " << w.state() << ": " << w.summary() << "\n";
    std::cout << "  priority Pt " << w.pt() << " (St " << w.st() << "), queue "
              << (w.queue().empty() ? "-" : w.queue()) << ", execution failures " << w.fail_cnt()
              << ", passes without a fitting node " << w.placement_failures() << "\n";
    if (w.total_nodes() > 0) {
      std::cout << "  last decision: " << w.feasible_nodes() << "/" << w.total_nodes()
                << " nodes fit\n";
      for (const auto& [filter, n] : std::map<std::string, int64_t>(w.rejected().begin(),
                                                                     w.rejected().end())) {
        std::cout << "    " << n << " rejected by " << filter << "\n";
      }
    }
    for (const auto& p : w.breakdown()) {
      std::cout << "    score " << p.name() << " " << p.value() << " x " << p.weight() << "\n";
    }
    if (!w.topology_rule().empty()) std::cout << "  GPUs chosen by " << w.topology_rule() << "\n";
  });
}

}  // namespace

void RegisterTaskCommands(CLI::App& app) {
  RegisterSubmit(app);
  RegisterLs(app);
  RegisterShow(app);
  RegisterLogs(app);
  RegisterCancel(app);
  RegisterWhy(app);
}

}  // namespace gpusched::cli
