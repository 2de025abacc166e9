#pragma once
// The signal a task is stopped with, as Slurm's --signal (issue 37): every stop of the task
// (preemption, time limit, cancel) sends it first, then SIGKILL after the task's grace. A
// task that exits 0 within the grace after a preemption counts as checkpointed and resumes
// with GPUSCHED_RESTART_COUNT set.
//
// Text form (`submit --signal`, a job file's `signal:`): a name with or without "SIG"
// (TERM, SIGUSR1, any case) or a number. Allowed: the catchable signals that end a process
// by default, or that a task may handle: 1-31 except SIGKILL (9, cannot be caught: no
// checkpoint could happen), SIGSTOP (19) and the job-control stops (20-22), which would
// freeze the task, and SIGCHLD (17) and SIGCONT (18), which end nothing; the real-time
// signals 34-64. Linux numbering.
//
// Thread-safety: pure functions.

#include <string>
#include <string_view>

#include "base/status.h"

namespace gpusched::core {

inline constexpr int kDefaultStopSignal = 15;  // SIGTERM

// The signal `text` names; InvalidArgument naming `field` and the value otherwise.
StatusOr<int> ParseStopSignal(std::string_view text, const std::string& field);
// InvalidArgument naming `field` and the value unless `sig` is an allowed stop signal.
Status CheckStopSignal(int sig, const std::string& field);
// "SIGUSR1", "SIGRTMIN+2", or the number for one without a name.
std::string StopSignalName(int sig);

}  // namespace gpusched::core
