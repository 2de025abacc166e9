#pragma once
// A task's exit as the agent reports it (issue 40: out of Agent::Impl): the FINISHED status
// and the GPU-memory evidence it carries (issue 36: who measured the peak).
//
// The evidence the task could write (its peak file, the preload ledger in its address space,
// its output) is read by ReadExitEvidence, relative to the log folder's descriptor
// (task_files.h), bounded. ExitReport decides, from that and the agent's own NVML peak:
//   - the peak: the agent's measurement (PEAK_AGENT_MEASURED) when it has one, else the
//     task's word (PEAK_TASK_WRITTEN: the server learns from those only when told to);
//   - a report whose memory-failure evidence is the task's is task-written as a whole, even
//     when the agent measured a peak: the server would learn the task's share from it;
//   - gpu_mem_exceeded only for a failed exit, from the task's evidence or the watchdog's
//     stop (its reason).
//
// Thread-safety: stateless.

#include <string>

#include "agent/task_executor.h"
#include "base/clock.h"
#include "base/units.h"
#include "gpusched/v1/gpusched.pb.h"

namespace gpusched::agent {

// What the task's files say of its GPU memory; all 0/false without files.
struct ExitEvidence {
  MiB peak_file_mib = 0;         // LOG.peak ($GPUSCHED_PEAK_MIB_FILE), the task's word
  MiB ledger_peak_mib = 0;       // the preload ledger's largest per-device peak (LOG.gpumem)
  bool task_says_exceeded = false;  // the ledger refused an allocation, or an OOM line in
                                    // the last 64 KiB of the log
};

// Reads `log_name`'s evidence in the folder `dir_fd` (missing or short files say nothing).
ExitEvidence ReadExitEvidence(int dir_fd, const std::string& log_name);

// The watchdog's stop reason says this (gpu_memory_watchdog.h).
inline constexpr const char* kExceededShare = "exceeded its GPU memory share";

// The FINISHED status of `e`: `now` dates an exit without its own time; `measured_mib` is
// the agent's NVML peak (0 = none); `evidence` the task's files' (ReadExitEvidence).
::gpusched::v1::TaskStatus ExitReport(const TaskExit& e, TimeMs now, MiB measured_mib,
                                      const ExitEvidence& evidence);

}  // namespace gpusched::agent
