// `gpusched submit`: a task spec from -f and the flags given explicitly on top of it, sent
// with an idempotency key (retried while the server is unreachable or could not store it).

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/rng.h"
#include "base/units.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/rule_flags.h"
#include "cli/task_wait.h"
#include "core/stop_signal.h"
#include "core/task_validation.h"
#include "rpc/convert.h"
#include "spec/profile_flag.h"
#include "spec/spec_yaml.h"

namespace gpusched::cli {
namespace {

struct SubmitFlags {
  ClientFlags client;
  std::string gpus, gpu_mem, cpu, mem, duration, name, retries, file, idempotency_key;
  std::string time, workdir, profile, heartbeat_timeout, array;
  std::string nodes, gpus_per_node, tasks_per_node, priority, preemptible, grace, gang_timeout;
  std::string signal;  // issue 37: Slurm's --signal
  std::string export_env;  // --export[=ALL|NONE|VAR[,VAR...]] (spec/env_export.h)
  bool keep_pending = false;
  bool wait = false;  // issue 41: sbatch --wait
  std::vector<std::string> selector, tolerations;  // repeatable (cli/rule_flags.h)
  std::vector<std::string> command;
};

// Flags given with -f fill what the file leaves out; one the file sets too is an error (a
// silent override would run something else than the file says).
void CheckNotInFile(CLI::App* cmd, const SubmitFlags& f, const char* flag, const char* field,
                    bool file_sets) {
  if (f.file.empty() || !cmd->count(flag) || !file_sets) return;
  Fail(InvalidArgument(std::string(flag) + ": " + f.file + " sets " + field +
                       " already; drop the flag or change the file"));
}

// The submit directory travels with the task (Slurm's default); a relative --workdir or
// workdir: is taken from where the command runs.
std::string AbsoluteDir(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(dir.empty() ? "." : dir, ec);
  if (ec) Fail(InvalidArgument("--workdir: \"" + dir + "\": " + ec.message()));
  return p.lexically_normal().string();
}

// The caller's environment, for --export (which never sends a GPUSCHED_* variable: the
// token and the CLI's other settings stay here).
std::map<std::string, std::string> CallerEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

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

// A whole number >= 0 given for `field`, or a usage error naming it and the value.
int64_t WholeNumber(const std::string& v, const char* field) {
  try {
    size_t used = 0;
    const long long n = std::stoll(v, &used);
    if (used == v.size() && n >= 0) return n;
  } catch (const std::exception&) {  // stoll: not a number
  }
  Fail(InvalidArgument(std::string(field) + ": \"" + v + "\" is not a whole number >= 0"));
}

// The task spec file of -f, parsed (its spec, and its export: rule if any).
spec::JobFile ReadJobFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) Fail(InvalidArgument("-f: cannot read " + path));
  std::stringstream text;
  text << in.rdbuf();
  return OrFail(spec::ParseJobFileYaml(text.str(), path));
}

// No flag given explicitly may set what the file (-f) sets already, nor may words after --
// replace the file's command.
void CheckFlagsNotInFile(CLI::App* cmd, const SubmitFlags& f, const core::TaskSpec& s,
                         const std::optional<spec::EnvExport>& export_rule) {
  struct FileField {
    const char* flag;
    const char* field;
    bool file_sets;
  };
  const FileField fields[] = {
      {"--gpus", "gpus", s.gpus != 0},
      {"--gpu-mem", "gpu_mem", s.gpu_mem_mib != 0},
      {"--cpu", "cpu", s.resources.cpu_milli != 0},
      {"--mem", "mem", s.resources.mem_mib != 0},
      {"--duration", "duration", s.duration_ms.has_value()},
      {"--time", "time", s.time_limit_ms.has_value()},
      {"--heartbeat-timeout", "heartbeat_timeout", s.heartbeat_timeout_ms.has_value()},
      {"--name", "name", !s.name.empty()},
      {"--retries", "retries", s.max_retries.has_value()},
      {"--workdir", "workdir", !s.workdir.empty()},
      {"--profile", "profile", s.profile.has_value()},
      {"--selector", "node_selector", !s.node_selector.empty()},
      {"--toleration", "tolerations", !s.tolerations.empty()},
      {"--nodes", "nodes", s.nodes != 1},
      {"--gpus-per-node", "gpus", s.gpus != 0},
      {"--tasks-per-node", "tasks_per_node", s.tasks_per_node != 1},
      {"--priority", "priority", !s.priority_class.empty()},
      {"--preemptible", "preemptible", !s.preemptible},
      {"--grace", "grace", s.grace_ms.has_value()},
      {"--signal", "signal", s.stop_signal.has_value()},
      {"--gang-timeout", "gang_timeout", s.gang_timeout_ms.has_value()},
      {"--export", "export", export_rule.has_value()},
  };
  for (const FileField& ff : fields) CheckNotInFile(cmd, f, ff.flag, ff.field, ff.file_sets);
  if (!f.file.empty() && !f.command.empty() && !s.command.empty()) {
    Fail(InvalidArgument("command: " + f.file +
                         " sets command already; drop the words after -- or change the file"));
  }
}

// --gpus, --nodes, --gpus-per-node, --tasks-per-node. Multi-node (gang): --gpus is the total,
// as Slurm's; --gpus-per-node what each node gives.
void ApplyGangFlags(CLI::App* cmd, const SubmitFlags& f, core::TaskSpec& s) {
  if (cmd->count("--gpus")) s.gpus = WholeNumber(f.gpus, "--gpus");
  if (cmd->count("--nodes")) s.nodes = WholeNumber(f.nodes, "--nodes");
  if (cmd->count("--gpus-per-node")) {
    if (cmd->count("--gpus")) {
      Fail(InvalidArgument("--gpus-per-node: give --gpus or --gpus-per-node, not both"));
    }
    s.gpus = WholeNumber(f.gpus_per_node, "--gpus-per-node");
  } else if (cmd->count("--gpus") && s.nodes > 1) {
    if (s.gpus % s.nodes != 0) {
      Fail(InvalidArgument("--gpus: " + f.gpus + " GPUs do not split evenly over " +
                           std::to_string(s.nodes) + " nodes (use --gpus-per-node)"));
    }
    s.gpus /= s.nodes;
  }
  if (cmd->count("--tasks-per-node")) {
    s.tasks_per_node = WholeNumber(f.tasks_per_node, "--tasks-per-node");
  }
}

// --priority, --preemptible, --grace, --signal, --gang-timeout: how the task is stopped.
void ApplyStopFlags(CLI::App* cmd, const SubmitFlags& f, core::TaskSpec& s) {
  if (cmd->count("--priority")) s.priority_class = f.priority;
  if (cmd->count("--preemptible")) {
    if (f.preemptible == "true") {
      s.preemptible = true;
    } else if (f.preemptible == "false") {
      s.preemptible = false;
    } else {
      Fail(InvalidArgument("--preemptible: \"" + f.preemptible + "\" is not true or false"));
    }
  }
  if (cmd->count("--grace")) s.grace_ms = OrFail(ParseDurationMs(f.grace, "--grace"));
  if (cmd->count("--signal")) s.stop_signal = OrFail(core::ParseStopSignal(f.signal, "--signal"));
  if (cmd->count("--gang-timeout")) {
    s.gang_timeout_ms = OrFail(ParseDurationMs(f.gang_timeout, "--gang-timeout"));
  }
}

// --gpu-mem through --toleration: resources, times, name, retries, workdir and node rules.
void ApplyTaskFlags(CLI::App* cmd, const SubmitFlags& f, core::TaskSpec& s) {
  if (cmd->count("--gpu-mem")) {
    s.gpu_mem_mib = OrFail(ParseSizeMiB(f.gpu_mem, "--gpu-mem"));
    if (s.gpu_mem_mib == 0) {  // the spec's 0 means "no share": a whole GPU or none
      Fail(InvalidArgument("--gpu-mem: \"" + f.gpu_mem +
                           "\" is no memory; a GPU share needs more than 0 (leave --gpu-mem "
                           "out to ask for whole GPUs)"));
    }
  }
  if (cmd->count("--cpu")) s.resources.cpu_milli = OrFail(ParseCpuMilli(f.cpu, "--cpu"));
  if (cmd->count("--mem")) s.resources.mem_mib = OrFail(ParseSizeMiB(f.mem, "--mem"));
  if (cmd->count("--duration")) s.duration_ms = OrFail(ParseDurationMs(f.duration, "--duration"));
  if (cmd->count("--name")) s.name = f.name;
  if (cmd->count("--retries")) s.max_retries = WholeNumber(f.retries, "--retries");
  if (cmd->count("--time")) s.time_limit_ms = OrFail(ParseDurationMs(f.time, "--time"));
  if (cmd->count("--heartbeat-timeout")) {
    s.heartbeat_timeout_ms = OrFail(ParseDurationMs(f.heartbeat_timeout, "--heartbeat-timeout"));
  }
  if (cmd->count("--workdir")) s.workdir = f.workdir;
  if (cmd->count("--profile")) {
    s.profile = OrFail(spec::ParseProfileFlag(f.profile, "--profile"));
  }
  if (cmd->count("--selector")) s.node_selector = LabelFlags(f.selector, "--selector");
  if (cmd->count("--toleration")) s.tolerations = TolerationFlags(f.tolerations, "--toleration");
}

// The last steps: an absolute workdir, --keep-pending, the exported environment, the command;
// then the spec is checked as the server will.
void FinishSpec(CLI::App* cmd, const SubmitFlags& f, std::optional<spec::EnvExport> export_rule,
                core::TaskSpec& s) {
  s.workdir = AbsoluteDir(s.workdir);
  if (f.keep_pending) s.keep_pending_if_infeasible = true;
  if (cmd->count("--export")) export_rule = OrFail(spec::ParseEnvExport(f.export_env, "--export"));
  if (export_rule) {  // the file's env: wins
    for (auto& [k, v] : spec::ExportedEnv(*export_rule, CallerEnvironment())) s.env.emplace(k, v);
  }
  if (!f.command.empty()) s.command = f.command;
  if (s.command.empty()) {
    Fail(InvalidArgument("command: missing; write it after --, e.g. "
                         "gpusched submit --gpus 1 -- python train.py"));
  }
  // The server checks again; here a value the wire cannot carry (nodes: 0 reads as 1 there)
  // is a usage error instead of another task.
  if (Status valid = core::ValidateTaskSpec(s); !valid.ok()) Fail(valid);
  if (Status own = core::CheckSubmittedEnv(s); !own.ok()) Fail(own);  // the server checks too
}

// Builds the spec: the file (-f) first, then every flag given explicitly on top of it.
core::TaskSpec BuildSpec(const SubmitFlags& f, CLI::App* cmd) {
  core::TaskSpec s;
  std::optional<spec::EnvExport> export_rule;
  if (!f.file.empty()) {
    spec::JobFile file = ReadJobFile(f.file);
    s = std::move(file.spec);
    export_rule = std::move(file.export_env);
  }
  CheckFlagsNotInFile(cmd, f, s, export_rule);
  ApplyGangFlags(cmd, f, s);
  ApplyStopFlags(cmd, f, s);
  ApplyTaskFlags(cmd, f, s);
  FinishSpec(cmd, f, std::move(export_rule), s);
  return s;
}

// --gpus through --heartbeat-timeout: what the task needs, and for how long.
void AddSubmitResourceFlags(CLI::App* cmd, SubmitFlags& f) {
  cmd->add_option("--gpus", f.gpus, "GPUs (whole GPUs unless --gpu-mem is given)");
  cmd->add_option("--gpu-mem", f.gpu_mem, "GPU memory per GPU, e.g. 6GiB (shares a GPU)");
  cmd->add_option("--profile", f.profile,
                  "What the task is, MODEL[,type=T][,batch=N][,size=HxW]: the server's "
                  "GPU-memory table gives its GPU memory (instead of --gpu-mem)");
  cmd->add_option("--cpu", f.cpu, "CPU cores, e.g. 4 or 500m");
  cmd->add_option("--mem", f.mem, "RAM, e.g. 4GiB");
  cmd->add_option("--duration", f.duration, "Expected run time, e.g. 2h (for its priority)");
  cmd->add_option("--time", f.time,
                  "Time limit, e.g. 30m: the task is stopped (SIGTERM, then SIGKILL) and fails");
  cmd->add_option("--heartbeat-timeout", f.heartbeat_timeout,
                  "e.g. 5m: the task gets a file, $GPUSCHED_HEARTBEAT_FILE, to touch while it "
                  "makes progress; untouched for this long it counts as hung and is "
                  "reclaimed after the server's task_timeout (retried)");
}

// --workdir through --retries: where and how it runs, where it may be placed, what it is.
void AddSubmitPlacementFlags(CLI::App* cmd, SubmitFlags& f) {
  cmd->add_option("--workdir", f.workdir,
                  "Working directory of the task (default: the directory you submit from)");
  cmd->add_flag("--export{ALL}", f.export_env,
                "Send your environment with the task: --export (= ALL: every variable but "
                "GPUSCHED_*), --export=NONE, --export=VAR[,VAR=VALUE...] (Slurm's); without "
                "it none is sent");
  cmd->add_flag("--keep-pending", f.keep_pending,
                "Accept a task no current node can fit (nodes may join later)");
  AddRepeatable(cmd, "--selector", f.selector,
                "Only nodes with this label, KEY=VALUE (repeatable: all must match; agent "
                "--label)");
  AddRepeatable(cmd, "--toleration", f.tolerations,
                "Tolerate a node taint: KEY=VALUE[:EFFECT], KEY[:EFFECT] (any value) or * "
                "(every taint); repeatable (agent --taint)");
  cmd->add_option("--name", f.name, "Task name");
  cmd->add_option("--array", f.array,
                  "A job array, A-B (e.g. 0-999, at most 10000 tasks): one task per index, "
                  "each with $GPUSCHED_ARRAY_INDEX, named NAME[i]; one request, one "
                  "transaction; prints every id");
  cmd->add_option("--retries", f.retries,
                  "Failures retried before the task is given up (default: the server's "
                  "default_retries, 3 unless its admin changed it)");
}

// --nodes through --gang-timeout: multi-node tasks, priority and how a task is stopped.
void AddSubmitGangFlags(CLI::App* cmd, SubmitFlags& f) {
  cmd->add_option("--nodes", f.nodes,
                  "Nodes of a multi-node task, placed all at once (gang); one process per node "
                  "gets WORLD_SIZE, RANK, MASTER_ADDR, ... (default 1)");
  cmd->add_option("--gpus-per-node", f.gpus_per_node,
                  "GPUs on each node of a multi-node task (--gpus is the total)");
  cmd->add_option("--tasks-per-node", f.tasks_per_node,
                  "Processes per node, each with gpus-per-node / K GPUs (default 1)");
  cmd->add_option("--priority", f.priority,
                  "Priority class (high, normal, low, or the server's own; default normal)");
  cmd->add_option("--preemptible", f.preemptible,
                  "false: never stopped for a higher priority class (default true)")
      ->expected(1);
  cmd->add_option("--grace", f.grace,
                  "When preempted: the --signal, then SIGKILL after this long (default 30s); "
                  "exit 0 within it = checkpointed");
  cmd->add_option("--signal", f.signal,
                  "Signal sent first on every stop (preemption, time limit, cancel), --grace "
                  "before SIGKILL: a name (TERM, USR1, SIGINT) or number (default TERM)");
  cmd->add_option("--gang-timeout", f.gang_timeout,
                  "A multi-node task that cannot start within this long gives up its "
                  "reservation and says why (default 24h)");
}

// The id (an array's handle ARRAY.*), or with --json {id[, ids, array]}.
void PrintSubmitted(const v1::SubmitResponse& resp, const std::optional<IndexRange>& array,
                    bool json) {
  if (json) {
    nlohmann::json out{{"id", resp.id()}};
    if (array) {
      out["ids"] = std::vector<uint64_t>(resp.ids().begin(), resp.ids().end());
      out["array"] = {{"first", array->first}, {"last", array->last}};
    }
    std::cout << out.dump() << "\n";
  } else if (array) {
    // Issue 41: the array's handle (its first task's id), what cancel, ls, show and wait take.
    std::cout << resp.id() << ".*\n";
  } else {
    std::cout << resp.id() << "\n";
  }
}

void RunSubmit(const SubmitFlags& f, CLI::App* cmd) {
  core::TaskSpec spec = BuildSpec(f, cmd);
  std::optional<IndexRange> array;
  if (cmd->count("--array")) {
    array = OrFail(ParseIndexRange(f.array, core::kMaxArrayTasks, "--array"));
  }
  Client c(f.client.server);
  v1::SubmitRequest req;
  rpc::TaskSpecToProto(spec, req.mutable_spec());
  req.set_idempotency_key(f.idempotency_key.empty() ? FreshIdempotencyKey() : f.idempotency_key);
  if (array) {
    req.mutable_array()->set_first(array->first);
    req.mutable_array()->set_last(array->last);
  }
  v1::SubmitResponse resp;
  Status s = SubmitWithRetries(c, req, resp);
  if (!s.ok()) Fail(s);
  if (array && resp.ids_size() != array->count()) {
    Fail(Internal("the server answered " + std::to_string(resp.ids_size()) + " ids for " +
                  std::to_string(array->count()) + " array tasks (a server older than "
                  "--array?)"));
  }
  if (!f.wait) return PrintSubmitted(resp, array, f.client.json);
  std::vector<uint64_t> ids(resp.ids().begin(), resp.ids().end());
  if (ids.empty()) ids.push_back(resp.id());
  // --json: one document, the final task(s); text: the id now, the end on stderr later.
  if (!f.client.json) PrintSubmitted(resp, array, false);
  std::cout << std::flush;
  WaitAndExit(c, ids, f.client.json);
}

}  // namespace

void RegisterSubmit(CLI::App& app) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* cmd = app.add_subcommand("submit", "Submit a task; prints its id");
  AddClientFlags(cmd, f->client);
  AddSubmitResourceFlags(cmd, *f);
  AddSubmitPlacementFlags(cmd, *f);
  AddSubmitGangFlags(cmd, *f);
  cmd->add_option("-f,--file", f->file, "Task spec YAML");
  cmd->add_option("--idempotency-key", f->idempotency_key,
                  "A retried submit with the same key returns the first task instead of a "
                  "new one (default: a fresh key per invocation)");
  cmd->add_flag("--wait", f->wait,
                "Wait until the task ends and exit with its outcome: 0, its exit code, or 1 "
                "with the reason (see gpusched wait); --json then prints the final task. "
                "Ctrl-C stops the waiting, not the task");
  cmd->add_option("command", f->command, "-- COMMAND [ARG...]");
  cmd->callback([f, cmd] { RunSubmit(*f, cmd); });
}

}  // namespace gpusched::cli
