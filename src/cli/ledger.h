#pragma once
// The ledger the fault benchmarks (bench chaos, bench failover) check: every task appends a
// line to LEDGER/<task id> when it starts, ends or is killed, so the checks read what really
// ran, not what the server believes.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "gpusched/v1/gpusched.pb.h"

namespace gpusched::cli {

// GPU memory of the simulated GPUs the fault benchmarks' agents get.
inline constexpr MiB kLedgerGpuMib = 16384;

// The task: ledger lines "start|end|kill ATTEMPT NODE GPUS SHARES NS", sleeping `sleep_ms`.
std::vector<std::string> LedgerTaskCommand(const std::filesystem::path& ledger, int64_t sleep_ms);

struct LedgerCheck {
  int64_t completed_twice = 0;
  int64_t overcommits = 0;
  std::map<uint64_t, int64_t> completions;  // task -> runs that ended normally
};

// Sweeps every GPU's start/end events in time order and counts the moments its running
// shares exceed `gpu_mib`, and the tasks that ran to completion more than once.
LedgerCheck CheckLedger(const std::filesystem::path& ledger, MiB gpu_mib);

// Polls `list` (every task's current record) until each of `acked` is terminal or
// `timeout_ms` passes; returns the last state seen of every task.
std::map<uint64_t, std::string> WaitUntilTerminal(
    const std::set<uint64_t>& acked,
    const std::function<StatusOr<std::vector<::gpusched::v1::Task>>()>& list, int64_t timeout_ms);

struct Outcomes {
  int64_t succeeded = 0, failed = 0;  // failed or cancelled
  int64_t lost = 0;                   // acknowledged, never terminal (or vanished)
  // The lost ones by id: the state last seen, "absent" when the server listed no such task.
  std::map<uint64_t, std::string> lost_states;
};
Outcomes CountOutcomes(const std::set<uint64_t>& acked, const std::map<uint64_t, std::string>& state);
// {"<id>": "<state last seen>"} of the lost tasks (the reports' `lost_tasks`): what to look
// for in the servers' logs.
nlohmann::json LostTasksJson(const Outcomes& o);

}  // namespace gpusched::cli
