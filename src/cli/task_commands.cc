// Client commands about tasks: ls, show, logs, cancel, why (submit: submit_command.cc).

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "base/units.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "rpc/convert.h"

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

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every task in any of `states` (none = every task), over every page, in id order: one
// listing, so a task that changes state meanwhile is listed once (the server reads the live
// states in one snapshot).
std::vector<v1::Task> ListTasks(Client& c, const std::set<std::string>& states) {
  std::vector<v1::Task> out;
  for (uint64_t after = 0;;) {
    v1::ListTasksRequest req;
    for (const std::string& st : states) req.add_states(st);
    // One state in `state` too: a server older than `states` then lists only it.
    if (states.size() == 1) req.set_state(*states.begin());
    req.set_after_id(after);
    v1::ListTasksResponse page;
    Status s =
        c.Call([&](grpc::ClientContext& ctx) { return c.stub().ListTasks(&ctx, req, &page); });
    if (!s.ok()) Fail(s);
    for (v1::Task& t : *page.mutable_tasks()) {
      // A server older than `states` answers every task: the filter is also applied here.
      if (states.empty() || states.count(t.state()) > 0) out.push_back(std::move(t));
    }
    if (page.next_after_id() == 0) return out;
    after = page.next_after_id();
  }
}

// The tasks in any of `states` (each checked first: a typo is a usage error), in id order.
std::vector<v1::Task> ListTasksIn(Client& c, const std::vector<std::string>& states) {
  std::set<std::string> names;
  for (const std::string& st : states) {
    names.insert(core::TaskStateName(OrFail(rpc::TaskStateFromName(st, "--state"))));
  }
  return ListTasks(c, names);
}

// Like squeue: what is queued or running unless --all or --state asks for more.
const std::vector<std::string> kActiveStates = {"pending", "preempted", "assigned", "running"};

void RegisterLs(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto states = std::make_shared<std::vector<std::string>>();
  auto all = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("ls", "List queued and running tasks (--all: every task)");
  AddClientFlags(cmd, *flags);
  cmd->add_option("--state", *states,
                  "Only tasks in this state (pending, preempted, assigned, running, succeeded, "
                  "failed, cancelled); repeat it or separate with commas")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_flag("-a,--all", *all, "Finished tasks too (the default shows active ones)");
  cmd->callback([flags, states, all] {
    Client c(flags->server);
    const std::vector<v1::Task> tasks =
        !states->empty() ? ListTasksIn(c, *states)
                         : (*all ? ListTasks(c, {}) : ListTasksIn(c, kActiveStates));
    const int64_t now = NowMs();
    if (flags->json) {
      nlohmann::json a = nlohmann::json::array();
      for (const v1::Task& t : tasks) a.push_back(TaskJson(t, now));
      std::cout << a.dump() << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows{{"ID", "NAME", "USER", "TEAM", "STATE", "NODE",
                                                "GPUS", "SUBMITTED", "ELAPSED", "EXIT",
                                                "ATTEMPTS", "REASON"}};
    for (const v1::Task& t : tasks) {
      const int64_t elapsed = ElapsedMs(t, now);
      // A task waiting again (retried, preempted) holds no node: the one it last ran on is
      // `show`'s to tell, as squeue shows a pending job's reason instead of a node.
      const bool waiting = t.state() == "pending" || t.state() == "preempted";
      rows.push_back({std::to_string(t.id()), t.name().empty() ? "-" : t.name(),
                      t.spec().user().empty() ? "-" : t.spec().user(),
                      t.spec().team().empty() ? "-" : t.spec().team(),
                      t.idle() ? t.state() + " (idle)" : t.state(),
                      waiting || t.node().empty() ? "-" : t.node(),
                      !waiting && t.gpus_size() ? JoinInts(t.gpus()) : "-",
                      Age(t.submitted_ms(), now),
                      elapsed > 0 ? FormatDurationMs(elapsed) : "-",
                      t.has_exit_code() ? std::to_string(t.exit_code()) : "-",
                      std::to_string(t.attempts()), t.reason()});
    }
    PrintTable(std::cout, rows);
    if (tasks.empty() && states->empty() && !*all) {
      std::cerr << "(no queued or running tasks; gpusched ls --all shows finished ones)\n";
    }
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

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

// The names of the task's variables (their values only in --json: a terminal is often
// shared or recorded).
std::string EnvNames(const v1::TaskSpec& spec) {
  const std::map<std::string, std::string> env(spec.env().begin(), spec.env().end());
  std::string out;
  for (const auto& [name, value] : env) out += (out.empty() ? "" : " ") + name;
  return OrDash(out);
}

// `show`'s main table: identity, state, request, placement, outcome and times.
std::vector<std::vector<std::string>> ShowRows(const v1::Task& t, int64_t now) {
  std::string cmdline;
  for (const std::string& a : t.spec().command()) cmdline += (cmdline.empty() ? "" : " ") + a;
  const std::set<std::string> hidden(t.redacted().begin(), t.redacted().end());
  const std::string kHidden = "(hidden: its owner's and admins' to read)";
  const int64_t elapsed = ElapsedMs(t, now);
  return {
      {"id:", std::to_string(t.id())},
      {"name:", OrDash(t.name())},
      {"user:", OrDash(t.spec().user())},
      {"team:", OrDash(t.spec().team())},
      {"state:", t.unstored_state().empty()
                     ? t.state()
                     : t.state() + " (" + t.unstored_state() + " pending, not stored yet)"},
      {"reason:", t.reason()},
      {"command:", hidden.count("command") ? kHidden : cmdline},
      {"workdir:", hidden.count("workdir") ? kHidden : OrDash(t.spec().workdir())},
      {"env:", hidden.count("env") ? kHidden : EnvNames(t.spec())},
      {"request:", DescribeRequest(t.spec())},
      {"node:", OrDash(t.node())},
      {"gpus:", (t.gpus_size() ? JoinInts(t.gpus()) : "-") +
                    (t.topology_rule().empty() ? "" : " (" + t.topology_rule() + ")")},
      {"gpu memory:", t.gpu_mem_need_mib() ? FormatSizeMiB(t.gpu_mem_need_mib()) +
                                                 " per GPU (" + t.mem_source() + ")"
                                           : t.mem_source()},
      {"exit code:", t.has_exit_code() ? std::to_string(t.exit_code()) : "-"},
      {"attempts:", std::to_string(t.attempts())},
      {"submitted:", Age(t.submitted_ms(), now)},
      {"started:", Age(t.started_ms(), now)},
      {"finished:", Age(t.finished_ms(), now)},
      {"elapsed:", elapsed > 0 ? FormatDurationMs(elapsed) : "-"}};
}

// The rows only some tasks have: a gang's ranks, preemptions, checkpoints; with -v the
// scheduler's counters.
void AddShowExtraRows(const v1::Task& t, bool verbose,
                      std::vector<std::vector<std::string>>& rows) {
  if (t.gang_nodes_size() > 0) {  // a gang: its nodes in rank order
    std::string ranks;
    for (int i = 0; i < t.gang_nodes_size(); ++i) {
      ranks += (i ? ", " : "") + std::to_string(i) + "=" + t.gang_nodes(i);
    }
    rows.push_back({"ranks:", ranks + " (" + std::to_string(t.ranks_done_size()) + " done)"});
  }
  if (t.preempted_by() != 0) {
    rows.push_back({"preempted by:", "task " + std::to_string(t.preempted_by()) + " (" +
                                         std::to_string(t.preemptions()) + " preemptions)"});
  }
  if (t.checkpoints() > 0) {  // issue 37: exited 0 within its grace after a preemption
    rows.push_back({"checkpointed:", "yes, attempt " + std::to_string(t.checkpointed_attempt()) +
                                         " exited 0 within its grace (" +
                                         std::to_string(t.checkpoints()) + " checkpoints, " +
                                         std::to_string(t.preemptions()) + " preemptions)"});
  }
  if (verbose) {
    rows.push_back({"failures:", std::to_string(t.fail_cnt()) + " (fail_cnt)"});
    rows.push_back({"priority:", "Pt " + std::to_string(t.pt()) + " (St " +
                                     std::to_string(t.st()) + ")"});
    rows.push_back({"placement failures:", std::to_string(t.placement_failures())});
  }
}

// What the executor reported: GPU use and idleness, the task's heartbeat.
void PrintExecutorView(const v1::Task& t, int64_t now) {
  if (t.has_gpu_util()) {  // CN109992422A claim 7: the executor's status
    const std::string since = "0 % since " + Age(t.idle_since_ms(), now);
    PrintTable(std::cout, {{"gpu use:", std::to_string(t.gpu_util()) + " %, " +
                                            FormatSizeMiB(t.gpu_mem_used_mib()) + " held"},
                           {"idle:", t.idle()               ? "yes (" + since + ")"
                                     : t.gpu_util() == 0 ? "not yet (" + since + ")"
                                                         : "no"}});
  }
  if (t.last_heartbeat_ms() > 0) {  // CN109992422A claims 7-8: the task heartbeats
    const std::string status = t.executor_status().empty() ? "-" : t.executor_status();
    PrintTable(std::cout,
               {{"executor:", status + (t.executor_detail().empty()
                                            ? ""
                                            : " (" + t.executor_detail() + ")")},
                {"last alive:", Age(t.last_heartbeat_ms(), now) + " (task heartbeat)"}});
  }
}

void PrintTaskInFull(const v1::Task& t, int64_t now, bool verbose) {
  std::vector<std::vector<std::string>> rows = ShowRows(t, now);
  AddShowExtraRows(t, verbose, rows);
  PrintTable(std::cout, rows);
  PrintExecutorView(t, now);
  std::cout << "history:\n";
  for (const auto& h : t.history()) {
    std::cout << "  " << Age(h.at_ms(), now) << "  " << h.state() << "  " << h.reason() << "\n";
  }
}

void RegisterShow(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto id = std::make_shared<std::string>();
  auto verbose = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("show", "Show one task in full");
  AddClientFlags(cmd, *flags);
  cmd->add_option("ID", *id, "Task id")->required();
  cmd->add_flag("-v,--verbose", *verbose,
                "Also the scheduler's view: priority Pt and score St, queue, failure counters");
  cmd->callback([flags, id, verbose] {
    const uint64_t task = ParseId(*id);
    Client c(flags->server);
    const v1::Task t = GetTask(c, task);
    const int64_t now = NowMs();
    if (flags->json) {
      std::cout << TaskJson(t, now).dump(2) << "\n";
      return;
    }
    PrintTaskInFull(t, now, *verbose);
  });
}

// A task with no output that never ran says so, instead of printing nothing.
void FailIfNeverRan(Client& c, uint64_t id) {
  const v1::Task t = GetTask(c, id);
  for (const auto& h : t.history()) {
    if (h.state() == "running") return;  // it ran: its log is just empty
  }
  Fail(FailedPrecondition("task " + std::to_string(id) + " has no output: it never ran (" +
                          t.state() + (t.reason().empty() ? "" : ": " + t.reason()) +
                          "); see gpusched why " + std::to_string(id)));
}

void RegisterLogs(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto id = std::make_shared<std::string>();
  auto follow = std::make_shared<bool>(false);
  auto rank = std::make_shared<std::string>("0");
  CLI::App* cmd = app.add_subcommand("logs", "Print a task's output (latest attempt)");
  AddClientFlags(cmd, *flags, false);
  cmd->add_option("ID", *id, "Task id")->required();
  cmd->add_flag("-f,--follow", *follow, "Keep printing until the task ends");
  cmd->add_option("--rank", *rank, "A multi-node task's rank (its node's process; default 0)");
  cmd->callback([flags, id, follow, rank] {
    const uint64_t task = ParseId(*id);
    int rank_number = -1;
    try {
      size_t used = 0;
      const int r = std::stoi(*rank, &used);
      if (used == rank->size() && r >= 0) rank_number = r;
    } catch (const std::exception&) {  // stoi: not a number
    }
    if (rank_number < 0) {
      Fail(InvalidArgument("--rank: \"" + *rank + "\" is not a whole number >= 0"));
    }
    Client c(flags->server);
    int64_t offset = 0, attempt = -1;
    for (;;) {
      v1::LogsRequest req;
      req.set_id(task);
      req.set_offset(offset);
      req.set_rank(rank_number);
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
      if (offset == 0 && (!*follow || resp.task_done())) FailIfNeverRan(c, task);
      if (!*follow || resp.task_done()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // follow: poll period
    }
  });
}

// `cancel ID...` or `cancel --state S`: each task is tried; the exit code is 1 if any failed.
// With authentication on, a task that is not the caller's is refused (exit 4) unless the
// caller is an admin; with `--state`, the tasks of others in that state are left alone and
// counted on stderr, not an error (the caller cannot know beforehand which are theirs).
void RegisterCancel(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto ids = std::make_shared<std::vector<std::string>>();
  auto states = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("cancel", "Cancel tasks (kills them if running)");
  AddClientFlags(cmd, *flags);
  cmd->add_option("ID", *ids, "Task ids");
  cmd->add_option("--state", *states, "Every task in this state (pending, running, ...)")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->callback([flags, ids, states] {
    if (ids->empty() && states->empty()) {
      Fail(InvalidArgument("cancel: name the tasks: gpusched cancel ID [ID...] or "
                           "gpusched cancel --state pending"));
    }
    std::vector<uint64_t> targets;
    for (const std::string& text : *ids) targets.push_back(ParseId(text));
    const size_t named = targets.size();  // the rest come from --state
    Client c(flags->server);
    if (!states->empty()) {
      for (const v1::Task& t : ListTasksIn(c, *states)) targets.push_back(t.id());
      if (targets.empty() && !flags->json) std::cerr << "(no task in that state)\n";
    }
    size_t others = 0;
    nlohmann::json done = nlohmann::json::array();
    Status first_error = Status::Ok();
    for (size_t i = 0; i < targets.size(); ++i) {
      const uint64_t id = targets[i];
      v1::CancelRequest req;
      req.set_id(id);
      v1::CancelResponse resp;
      Status s =
          c.Call([&](grpc::ClientContext& ctx) { return c.stub().Cancel(&ctx, req, &resp); });
      if (!s.ok() && s.code() == StatusCode::kPermissionDenied && i >= named) {
        ++others;  // another user's task in that state
        continue;
      }
      if (!s.ok()) {
        if (s.code() == StatusCode::kUnavailable) Fail(s);
        if (first_error.ok()) first_error = s;
        if (!flags->json) std::cerr << "gpusched: " << s.message() << "\n";
        continue;
      }
      if (flags->json) {
        done.push_back(TaskJson(resp.task(), NowMs()));
      } else {
        std::cout << "task " << id << " cancelled\n";
      }
    }
    if (flags->json) std::cout << done.dump() << "\n";
    if (others > 0 && !flags->json) {
      std::cerr << "(" << others << " task(s) of other users in that state left alone)\n";
    }
    if (!first_error.ok()) {
      if (flags->json) Fail(first_error);
      ExitWith(ExitCodeFor(first_error));
    }
  });
}

void RegisterWhy(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto id = std::make_shared<std::string>();
  auto verbose = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("why", "Explain where a task runs or why it waits");
  AddClientFlags(cmd, *flags);
  cmd->add_option("ID", *id, "Task id")->required();
  cmd->add_flag("-v,--verbose", *verbose,
                "Also the scheduler's view: priority Pt, score St, queue, score breakdown");
  cmd->callback([flags, id, verbose] {
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
    // "task 3 is pending: ...", "task 3 succeeded: exited 0".
    const bool finished = w.state() == "succeeded" || w.state() == "failed" ||
                          w.state() == "cancelled";
    std::cout << "task " << w.id() << (finished ? " " : " is ") << w.state() << ": "
              << w.summary() << "\n";
    if (!w.need().empty()) std::cout << "  " << w.need() << "\n";
    if (*verbose) {
      std::cout << "  priority Pt " << w.pt() << " (St " << w.st() << "), queue "
                << (w.queue().empty() ? "-" : w.queue()) << ", execution failures "
                << w.fail_cnt() << ", passes without a fitting node " << w.placement_failures()
                << "\n";
    }
    if (w.total_nodes() > 0) {
      // Issue 37: which pass decided, and how long ago, so a reason is never taken as now's.
      std::cout << "  last decision: " << w.feasible_nodes() << "/" << w.total_nodes()
                << " nodes fit"
                << (w.pass() > 0 ? " (pass " + std::to_string(w.pass()) + ", " +
                                       FormatDurationMs(w.pass_age_ms()) + " ago)"
                                 : std::string())
                << "\n";
      for (const auto& [filter, n] : std::map<std::string, int64_t>(w.rejected().begin(),
                                                                     w.rejected().end())) {
        std::cout << "    " << n << " rejected by " << filter << "\n";
      }
    }
    for (const auto& p : w.breakdown()) {
      if (!*verbose) break;  // the score breakdown is for --verbose
      std::cout << "    score " << p.name() << " " << p.value() << " x " << p.weight() << "\n";
    }
    if (!w.topology_rule().empty()) std::cout << "  GPUs chosen by " << w.topology_rule() << "\n";
  });
}

}  // namespace

void RegisterTaskCommands(CLI::App& app) {
  RegisterSubmit(app);  // submit_command.cc
  RegisterLs(app);
  RegisterShow(app);
  RegisterLogs(app);
  RegisterCancel(app);
  RegisterWhy(app);
}

}  // namespace gpusched::cli
