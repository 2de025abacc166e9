// Client commands about tasks: ls, show, logs, cancel, why (submit: submit_command.cc; wait:
// task_wait.cc; which tasks a command names: task_selection.h).

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
#include "cli/task_selection.h"
#include "cli/task_wait.h"
#include "core/filters.h"
#include "rpc/convert.h"

namespace gpusched::cli {
namespace {

// Like squeue: what is queued or running unless --all or --state asks for more.
const std::vector<std::string> kActiveStates = {"pending", "preempted", "assigned", "running"};

// The ls table's rows: one per task.
std::vector<std::vector<std::string>> LsRows(const std::vector<v1::Task>& tasks, int64_t now) {
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
                    t.idle() ? t.state() + " (idle)" : StateWithFailure(t),
                    waiting || t.node().empty() ? "-" : t.node(),
                    !waiting && t.gpus_size() ? JoinInts(t.gpus()) : "-",
                    Age(t.submitted_ms(), now), elapsed > 0 ? FormatDurationMs(elapsed) : "-",
                    t.has_exit_code() ? std::to_string(t.exit_code()) : "-",
                    std::to_string(t.attempts()), t.reason()});
  }
  return rows;
}

void RegisterLs(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto filter = std::make_shared<TaskFilter>();
  auto specs = std::make_shared<std::vector<std::string>>();
  auto all = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("ls", "List queued and running tasks (--all: every task)");
  AddClientFlags(cmd, *flags);
  cmd->add_option("ID", *specs, "Only these tasks: ID, A-B, ARRAY.* (a job array), ARRAY.INDEX");
  cmd->add_option("--state", filter->states,
                  "Only tasks in this state (pending, preempted, assigned, running, succeeded, "
                  "failed, cancelled); repeat it or separate with commas")
      ->delimiter(',')
      ->allow_extra_args(false);
  AddFilterFlags(cmd, *filter, "list", true);
  cmd->add_flag("-a,--all", *all, "Finished tasks too (the default shows active ones)");
  cmd->callback([flags, filter, specs, all] {
    Client c(flags->server);
    // Named tasks, or --all: every state unless --state says which.
    TaskFilter f = *filter;
    if (f.states.empty() && !*all && specs->empty()) f.states = kActiveStates;
    std::vector<v1::Task> tasks;
    if (specs->empty()) {
      tasks = ListFiltered(c, f);
    } else {
      for (uint64_t id : SelectTaskIds(c, *specs, f)) tasks.push_back(GetTask(c, id));
    }
    const int64_t now = NowMs();
    if (flags->json) {
      nlohmann::json a = nlohmann::json::array();
      for (const v1::Task& t : tasks) a.push_back(TaskJson(t, now));
      std::cout << a.dump() << "\n";
      return;
    }
    PrintTable(std::cout, LsRows(tasks, now));
    if (tasks.empty() && filter->Empty() && specs->empty() && !*all) {
      std::cerr << "(no queued or running tasks; gpusched ls --all shows finished ones)\n";
    }
  });
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
      {"failure:", OrDash(t.failure())},
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
  auto specs = std::make_shared<std::vector<std::string>>();
  auto filter = std::make_shared<TaskFilter>();
  auto verbose = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("show", "Show tasks in full");
  AddClientFlags(cmd, *flags);
  cmd->add_option("ID", *specs, "Task ids: ID, A-B, ARRAY.* (a job array), ARRAY.INDEX");
  AddFilterFlags(cmd, *filter, "show", true);
  cmd->add_flag("-v,--verbose", *verbose,
                "Also the scheduler's view: priority Pt and score St, queue, failure counters");
  cmd->callback([flags, specs, filter, verbose] {
    if (specs->empty() && filter->Empty()) {
      Fail(InvalidArgument("show: name the tasks: gpusched show ID [ID...] (or A-B, ARRAY.*, "
                           "--name NAME, ...)"));
    }
    Client c(flags->server);
    const std::vector<uint64_t> ids = SelectTaskIds(c, *specs, *filter);
    const int64_t now = NowMs();
    if (flags->json) {  // one task: its object (as before); several: an array of them
      nlohmann::json out = nlohmann::json::array();
      for (uint64_t id : ids) out.push_back(TaskJson(GetTask(c, id), now));
      std::cout << (specs->size() == 1 && ids.size() == 1 ? out[0] : out).dump(2) << "\n";
      return;
    }
    if (ids.empty()) std::cerr << "(no task matches)\n";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) std::cout << "\n";
      PrintTaskInFull(GetTask(c, ids[i]), now, *verbose);
    }
  });
}

// A task with no output that never ran says so, instead of printing nothing; one that could
// not start says why after what its log holds (the shim's words). Both exit 1.
void FailIfNeverRan(const v1::Task& t, bool has_output) {
  bool ran = false;
  for (const auto& h : t.history()) ran = ran || h.state() == "running";
  const std::string id = std::to_string(t.id());
  const std::string why = StateWithFailure(t) + (t.reason().empty() ? "" : ": " + t.reason());
  if (t.failure() == "launch") {
    Fail(FailedPrecondition("task " + id + " could not start: " + t.reason()));
  }
  if (ran || has_output) return;  // it ran: its log is just empty
  Fail(FailedPrecondition("task " + id + " has no output: it never ran (" + why +
                          "); see gpusched why " + id));
}

struct LogsFlags {
  ClientFlags client;
  std::string id;
  bool follow = false;
  std::string rank = "0";
  std::string attempt = "0";
};

// A flag's whole number >= `min`, else a usage error naming the flag and the text.
int64_t WholeFlag(const std::string& text, const std::string& flag, int64_t min) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= min) return v;
  } catch (const std::exception&) {  // stoll: not a number
  }
  Fail(InvalidArgument(flag + ": \"" + text + "\" is not a whole number >= " +
                       std::to_string(min)));
}

// Prints the log from the server until it is drained (or, following, until the task ended).
void StreamLog(Client& c, const LogsFlags& f, uint64_t task, int rank, int64_t wanted) {
  int64_t offset = 0, attempt = -1;
  for (;;) {
    v1::LogsRequest req;
    req.set_id(task);
    req.set_offset(offset);
    req.set_rank(rank);
    req.set_attempt(wanted);
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
    if (!f.follow || resp.task_done()) {
      // Only the latest attempt's end says whether the task could start at all.
      if (wanted == 0 && (offset == 0 || resp.task_done())) {
        FailIfNeverRan(GetTask(c, task), offset > 0);
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // follow: poll period
  }
}

void RegisterLogs(CLI::App& app) {
  auto f = std::make_shared<LogsFlags>();
  CLI::App* cmd = app.add_subcommand("logs", "Print a task's output (latest attempt)");
  AddClientFlags(cmd, f->client, false);
  cmd->add_option("ID", f->id, "Task id")->required();
  cmd->add_flag("-f,--follow", f->follow,
                "Keep printing until the task ends; then exit as gpusched wait does (0, the "
                "task's exit code, or 1 with the reason)");
  cmd->add_option("--rank", f->rank, "A multi-node task's rank (its node's process; default 0)");
  cmd->add_option("--attempt", f->attempt,
                  "An earlier attempt's output (1 = the first; default the latest)");
  cmd->callback([f] {
    const uint64_t task = ParseTaskId(f->id);
    const int rank = static_cast<int>(WholeFlag(f->rank, "--rank", 0));
    const int64_t attempt = WholeFlag(f->attempt, "--attempt", 0);
    Client c(f->client.server);
    StreamLog(c, *f, task, rank, attempt);
    if (!f->follow) return;
    const v1::Task t = GetTask(c, task);  // the end, as `wait` reports it
    if (t.state() != "succeeded") std::cerr << "gpusched: " << DescribeEnd(t) << "\n";
    ExitWith(ExitCodeOfTasks({t}));
  });
}

// Cancels one task; OK or the server's refusal.
Status CancelOne(Client& c, uint64_t id, v1::CancelResponse& resp) {
  v1::CancelRequest req;
  req.set_id(id);
  return c.Call([&](grpc::ClientContext& ctx) { return c.stub().Cancel(&ctx, req, &resp); });
}

// What `cancel` did to each task it selected.
struct CancelTally {
  size_t others = 0, ended = 0;  // skipped: another user's, already ended
  nlohmann::json done = nlohmann::json::array();  // --json: the cancelled tasks
  Status first_error = Status::Ok();
};

// Cancels each of `targets`. One that a range, an array or a filter selected (not in
// `own_id`) is skipped quietly when it is another user's or already ended.
CancelTally CancelEach(Client& c, const std::vector<uint64_t>& targets,
                       const std::set<uint64_t>& own_id, bool json) {
  CancelTally tally;
  for (uint64_t id : targets) {
    v1::CancelResponse resp;
    const Status s = CancelOne(c, id, resp);
    const bool selected = own_id.count(id) == 0;
    if (!s.ok() && selected && s.code() == StatusCode::kPermissionDenied) {
      ++tally.others;
    } else if (!s.ok() && selected && s.code() == StatusCode::kFailedPrecondition) {
      ++tally.ended;
    } else if (!s.ok()) {
      if (s.code() == StatusCode::kUnavailable) Fail(s);
      if (tally.first_error.ok()) tally.first_error = s;
      if (!json) std::cerr << "gpusched: " << s.message() << "\n";
    } else if (json) {
      tally.done.push_back(TaskJson(resp.task(), NowMs()));
    } else {
      std::cout << "task " << id << " cancelled\n";
    }
  }
  return tally;
}

// "(left alone: 2 tasks of other users, 1 task that already ended)" on stderr, or nothing.
void PrintLeftAlone(size_t others, size_t ended) {
  if (others == 0 && ended == 0) return;
  std::string parts;
  if (others > 0) {
    parts = std::to_string(others) + (others == 1 ? " task of another user"
                                                  : " tasks of other users");
  }
  if (ended > 0) {
    parts += (parts.empty() ? "" : ", ") + std::to_string(ended) +
             (ended == 1 ? " task that already ended" : " tasks that already ended");
  }
  std::cerr << "(left alone: " << parts << ")\n";
}

// `cancel ID...`, `cancel A-B`, `cancel ARRAY.*`, `cancel --state S`, `--name`, `--user`,
// `--node`: each task is tried; the exit code is 1 if any failed. With authentication on, a
// task that is not the caller's is refused (exit 4) unless the caller is an admin. A task
// named by its own id reports every refusal; one a range, an array or a filter selected is
// skipped quietly when it already ended or is another user's (counted on stderr: the caller
// cannot know beforehand which are theirs).
void RegisterCancel(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto specs = std::make_shared<std::vector<std::string>>();
  auto filter = std::make_shared<TaskFilter>();
  CLI::App* cmd = app.add_subcommand("cancel", "Cancel tasks (kills them if running)");
  AddClientFlags(cmd, *flags);
  cmd->add_option("ID", *specs, "Task ids: ID, A-B, ARRAY.* (a job array), ARRAY.INDEX");
  cmd->add_option("--state", filter->states, "Every task in this state (pending, running, ...)")
      ->delimiter(',')
      ->allow_extra_args(false);
  AddFilterFlags(cmd, *filter, "cancel", false);
  cmd->callback([flags, specs, filter] {
    if (specs->empty() && filter->Empty()) {
      Fail(InvalidArgument("cancel: name the tasks: gpusched cancel ID [ID...], A-B, ARRAY.*, "
                           "or --state pending, --name NAME, --user USER, --node NODE"));
    }
    std::set<uint64_t> own_id;  // named one by one: every refusal is reported
    for (const std::string& spec : *specs) {
      if (spec.find_first_of(".-") == std::string::npos) own_id.insert(ParseTaskId(spec));
    }
    Client c(flags->server);
    TaskFilter f = *filter;
    if (f.states.empty() && !f.Empty()) f.states = kActiveStates;  // --name: its live tasks
    const std::vector<uint64_t> targets = SelectTaskIds(c, *specs, f);
    if (targets.empty() && !flags->json) std::cerr << "(no task matches)\n";
    const CancelTally tally = CancelEach(c, targets, own_id, flags->json);
    if (flags->json) std::cout << tally.done.dump() << "\n";
    if (!flags->json) PrintLeftAlone(tally.others, tally.ended);
    if (!tally.first_error.ok()) {
      if (flags->json) Fail(tally.first_error);
      ExitWith(ExitCodeFor(tally.first_error));
    }
  });
}

// What a filter rejects nodes for ("insufficient CPU"), by its name (core/filters.h).
std::string FilterPhrase(const std::string& name) {
  // The GPU-memory filter also turns away a whole-GPU task from GPUs that others share: its
  // word must not suggest that more memory per GPU would help.
  if (name == "GpuMemoryFit") return "no GPU with the free memory, or whole GPUs, it asks for";
  for (int id = 0; id < core::kNumFilters; ++id) {
    if (name == core::FilterName(id)) return core::FilterReason(id);
  }
  return "rejected by " + name;
}

// `why`'s "last decision" lines: how many nodes fit and what the filters found of the rest.
void PrintLastDecision(const v1::WhyResponse& w, bool verbose) {
  if (w.total_nodes() == 0) return;
  // Issue 37: which pass decided, and how long ago, so a reason is never taken as now's.
  // Issue 43: a placement through the node index looked at some nodes only.
  const bool indexed = w.examined_nodes() > 0 && w.examined_nodes() < w.total_nodes();
  std::cout << "  last decision: "
            << (indexed ? "the node index examined " + std::to_string(w.examined_nodes()) +
                              " of " + std::to_string(w.total_nodes()) + " nodes, " +
                              std::to_string(w.feasible_nodes()) + " fit"
                        : std::to_string(w.feasible_nodes()) + "/" +
                              std::to_string(w.total_nodes()) + " nodes fit")
            << (w.pass() > 0 ? " (pass " + std::to_string(w.pass()) + ", " +
                                   FormatDurationMs(w.pass_age_ms()) + " ago)"
                             : std::string())
            << "\n";
  for (const auto& [filter, n] :
       std::map<std::string, int64_t>(w.rejected().begin(), w.rejected().end())) {
    // Issue 41: users read what the filter found; its name is for -v.
    std::cout << "    " << n << (n == 1 ? " node: " : " nodes: ") << FilterPhrase(filter)
              << (verbose ? " (" + filter + ")" : std::string()) << "\n";
  }
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
    req.set_id(ParseTaskId(*id));
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
    PrintLastDecision(w, *verbose);
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
  RegisterWait(app);  // task_wait.cc
  RegisterWhy(app);
}

}  // namespace gpusched::cli
