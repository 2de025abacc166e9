#include "cli/task_wait.h"

#include <csignal>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "base/units.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "cli/task_selection.h"

namespace gpusched::cli {
namespace {

bool Finished(const v1::Task& t) {
  return t.state() == "succeeded" || t.state() == "failed" || t.state() == "cancelled";
}

std::atomic<bool> g_interrupted{false};
extern "C" void OnInterrupt(int) { g_interrupted.store(true); }

// Ctrl-C while waiting ends the wait, never the tasks: say so, exit 130.
void ExitIfInterrupted(const std::vector<uint64_t>& waiting) {
  if (!g_interrupted.load()) return;
  std::string ids;
  for (size_t i = 0; i < waiting.size() && i < 5; ++i) ids += " " + std::to_string(waiting[i]);
  if (waiting.size() > 5) ids += " ...";
  std::cerr << "\ngpusched: stopped waiting; the tasks run on (gpusched cancel" << ids
            << " stops them)\n";
  ExitWith(kExitInterrupted);
}

// The current state of every task in `open` (ids not yet finished, ascending): one GetTask
// each when they are few, else the listing of their id range (an array's is one page per
// 1,000 tasks), whatever else the cluster holds, and a GetTask for any it lacks.
std::vector<v1::Task> Poll(Client& c, const std::vector<uint64_t>& open) {
  constexpr size_t kFewTasks = 32;
  std::vector<v1::Task> out;
  if (open.size() <= kFewTasks) {
    for (uint64_t id : open) out.push_back(GetTask(c, id));
    return out;
  }
  std::map<uint64_t, v1::Task> listed;
  for (v1::Task& t : ListIdRange(c, open.front(), open.back())) {
    listed.emplace(t.id(), std::move(t));
  }
  for (uint64_t id : open) {
    auto it = listed.find(id);
    out.push_back(it != listed.end() ? std::move(it->second) : GetTask(c, id));
  }
  return out;
}

}  // namespace

std::string StateWithFailure(const v1::Task& t) {
  if (t.failure().empty() || t.failure() == t.state()) return t.state();  // "cancelled"
  return t.state() + " (" + t.failure() + ")";
}

std::string DescribeEnd(const v1::Task& t) {
  std::string out = "task " + std::to_string(t.id()) + " " + StateWithFailure(t);
  if (t.state() != "succeeded" && !t.reason().empty()) out += ": " + t.reason();
  return out;
}

int ExitCodeOfTasks(const std::vector<v1::Task>& tasks) {
  for (const v1::Task& t : tasks) {
    if (t.state() == "succeeded") continue;
    const bool own_code = t.failure() == "exit" && t.has_exit_code() && t.exit_code() > 0 &&
                          t.exit_code() <= 255;
    return own_code ? t.exit_code() : kExitFailure;
  }
  return kExitOk;
}

WaitResult WaitForTasks(Client& c, const std::vector<uint64_t>& ids, int64_t timeout_ms,
                        const std::function<void(const v1::Task&)>& on_end) {
  const auto start = std::chrono::steady_clock::now();
  g_interrupted.store(false);
  std::signal(SIGINT, OnInterrupt);
  std::map<uint64_t, v1::Task> last;  // every task as last seen
  std::vector<uint64_t> open = ids;  // ascending, each once (Poll lists their id range)
  std::sort(open.begin(), open.end());
  open.erase(std::unique(open.begin(), open.end()), open.end());
  for (;;) {
    std::vector<uint64_t> still;
    for (v1::Task& t : Poll(c, open)) {
      const uint64_t id = t.id();
      if (Finished(t)) {
        on_end(t);
      } else {
        still.push_back(id);
      }
      last[id] = std::move(t);
    }
    open = std::move(still);
    WaitResult result;
    const bool out_of_time =
        timeout_ms > 0 && std::chrono::steady_clock::now() - start >=
                              std::chrono::milliseconds(timeout_ms);
    if (open.empty() || out_of_time) {
      std::signal(SIGINT, SIG_DFL);
      for (auto& [id, t] : last) result.tasks.push_back(std::move(t));
      result.timed_out = !open.empty();
      return result;
    }
    for (int slice = 0; slice < 10 && !g_interrupted.load(); ++slice) {  // 500 ms in all
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ExitIfInterrupted(open);
  }
}

[[noreturn]] void WaitAndExit(Client& c, const std::vector<uint64_t>& ids, bool json) {
  WaitResult r = WaitForTasks(c, ids, 0, [json](const v1::Task& t) {
    if (!json) std::cerr << DescribeEnd(t) << "\n";
  });
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::Task& t : r.tasks) out.push_back(TaskJson(t, NowMs()));
    std::cout << (out.size() == 1 ? out[0] : out).dump() << "\n" << std::flush;
  }
  ExitWith(ExitCodeOfTasks(r.tasks));
}

void RegisterWait(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto specs = std::make_shared<std::vector<std::string>>();
  auto filter = std::make_shared<TaskFilter>();
  auto timeout = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "wait", "Wait until tasks end; exit with their outcome (Ctrl-C stops waiting, not them)");
  AddClientFlags(cmd, *flags);
  cmd->add_option("ID", *specs, "Task ids: ID, A-B, ARRAY.* (a job array), ARRAY.INDEX");
  AddFilterFlags(cmd, *filter, "wait for", true);
  cmd->add_option("--timeout", *timeout,
                  "Give up after this long (e.g. 90s, 2h): exit 124 with the tasks running on");
  cmd->footer(
      "Exit code: 0 when every task succeeded; else, for the first (by id) that did not, its "
      "exit code when it exited non-zero, or 1 when it ended without one (time limit, out of "
      "memory, node lost, cancelled, ...); 124 when --timeout passed first.");
  cmd->callback([flags, specs, filter, timeout] {
    const int64_t timeout_ms =
        timeout->empty() ? 0 : OrFail(ParseDurationMs(*timeout, "--timeout"), kExitUsage);
    if (specs->empty() && filter->Empty()) {
      Fail(InvalidArgument("wait: name the tasks: gpusched wait ID [ID...] (or A-B, ARRAY.*, "
                           "--name NAME, ...)"));
    }
    Client c(flags->server);
    const std::vector<uint64_t> ids = SelectTaskIds(c, *specs, *filter);
    if (ids.empty()) Fail(NotFound("wait: no task matches"));
    WaitResult r = WaitForTasks(c, ids, timeout_ms, [&](const v1::Task& t) {
      if (!flags->json) std::cout << DescribeEnd(t) << "\n" << std::flush;
    });
    if (flags->json) {
      nlohmann::json out = nlohmann::json::array();
      for (const v1::Task& t : r.tasks) out.push_back(TaskJson(t, NowMs()));
      std::cout << out.dump() << "\n" << std::flush;
    }
    if (r.timed_out) {
      size_t running = 0;
      for (const v1::Task& t : r.tasks) running += Finished(t) ? 0 : 1;
      std::cerr << "gpusched: wait: --timeout " << *timeout << " passed; " << running
                << (running == 1 ? " task" : " tasks") << " not finished (they run on)\n";
      ExitWith(kExitWaitTimeout);
    }
    ExitWith(ExitCodeOfTasks(r.tasks));
  });
}

}  // namespace gpusched::cli
