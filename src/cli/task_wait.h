#pragma once
// Waiting for tasks to end (issue 41): `gpusched wait`, `submit --wait` and `logs -f`.
//
// Exit codes: 0 when every task succeeded; else, for the first task (by id) that did not,
// its own exit code when it failed by exiting non-zero (1-255), or 1 when it ended without
// one (a time limit, out of memory, a lost node, a launch failure, cancelled, ...: the reason
// is printed); 124 when --timeout passed first (as timeout(1)). Ctrl-C stops the waiting only:
// the tasks run on (exit 130).

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "cli/client.h"

namespace gpusched::cli {

inline constexpr int kExitWaitTimeout = 124;
inline constexpr int kExitInterrupted = 130;

// "failed (timeout)", "cancelled", "running": the state, with the failure when it says more.
std::string StateWithFailure(const v1::Task& t);
// "task 12 failed (exit): exited with code 3 (...)" / "task 12 succeeded".
std::string DescribeEnd(const v1::Task& t);
// The exit code for these tasks once they ended (the rule above; all must be finished).
int ExitCodeOfTasks(const std::vector<v1::Task>& tasks);

struct WaitResult {
  std::vector<v1::Task> tasks;  // every task, in id order, as last seen
  bool timed_out = false;
};
// Polls until every task in `ids` has finished or `timeout_ms` (> 0) passes on the monotonic
// clock, calling `on_end` once per task as it is seen finished. Ctrl-C: says the tasks run on
// and exits 130.
WaitResult WaitForTasks(Client& c, const std::vector<uint64_t>& ids, int64_t timeout_ms,
                        const std::function<void(const v1::Task&)>& on_end);

// `submit --wait`: waits for `ids`, says each end on stderr (or prints the final task with
// `json`: one object for one task, an array for several) and exits with the rule above.
[[noreturn]] void WaitAndExit(Client& c, const std::vector<uint64_t>& ids, bool json);

// `gpusched wait ID... [--timeout D] [--name ...]`.
void RegisterWait(CLI::App& app);

}  // namespace gpusched::cli
