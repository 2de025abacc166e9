#include "agent/exit_report.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "agent/task_cgroup.h"
#include "agent/task_files.h"
#include "preload/share_ledger.h"

namespace gpusched::agent {

namespace v1 = ::gpusched::v1;

ExitEvidence ReadExitEvidence(int dir_fd, const std::string& log_name) {
  ExitEvidence out;
  std::istringstream peak(ReadTaskFile(dir_fd, log_name + ".peak", 64).value_or(""));
  if (int64_t mib = 0; peak >> mib && mib > 0) out.peak_file_mib = mib;
  preload::LedgerLayout ledger{};
  const std::string state = ReadTaskFile(dir_fd, log_name + ".gpumem", sizeof ledger).value_or("");
  if (state.size() == sizeof ledger) {
    std::memcpy(&ledger, state.data(), sizeof ledger);
    out.task_says_exceeded = ledger.refused > 0;
    for (uint64_t bytes : ledger.peak_bytes) {
      out.ledger_peak_mib =
          std::max<MiB>(out.ledger_peak_mib, static_cast<MiB>((bytes + (1 << 20) - 1) >> 20));
    }
  }
  if (!out.task_says_exceeded) {
    const std::string text = ReadTaskFile(dir_fd, log_name, 64 * 1024, /*tail=*/true).value_or("");
    for (const char* marker : {"CUDA out of memory", "CUDA_ERROR_OUT_OF_MEMORY",
                               "cudaErrorMemoryAllocation", "gpusched: GPU memory share exceeded"}) {
      if (text.find(marker) != std::string::npos) out.task_says_exceeded = true;
    }
  }
  return out;
}

v1::TaskStatus ExitReport(const TaskExit& e, TimeMs now, MiB measured_mib,
                          const ExitEvidence& evidence) {
  v1::TaskStatus st;
  st.set_id(e.id);
  st.set_attempt(e.attempt);
  st.set_kind(v1::TaskStatus::FINISHED);
  st.set_exit_code(e.exit_code);
  st.set_reason(e.reason);
  // Kept with the report until acknowledged: a re-report after a reconnect says when.
  st.set_finished_ms(e.finished_ms > 0 ? e.finished_ms : now);
  if (e.permanent) st.set_permanent(true);  // its user cannot run it: no retry fixes that
  if (TaskCgroups::IsOutOfMemoryReason(e.reason)) st.set_out_of_memory(true);
  st.set_peak_gpu_mem_mib(evidence.peak_file_mib > 0 ? evidence.peak_file_mib
                                                     : evidence.ledger_peak_mib);
  const bool watchdog = e.reason.find(kExceededShare) != std::string::npos;
  if (e.exit_code != 0 && (evidence.task_says_exceeded || watchdog)) st.set_gpu_mem_exceeded(true);
  if (st.peak_gpu_mem_mib() > 0 || st.gpu_mem_exceeded()) {
    st.set_peak_source(v1::TaskStatus::PEAK_TASK_WRITTEN);
  }
  if (measured_mib > 0 && !(st.gpu_mem_exceeded() && evidence.task_says_exceeded)) {
    st.set_peak_gpu_mem_mib(measured_mib);
    st.set_peak_source(v1::TaskStatus::PEAK_AGENT_MEASURED);
  }
  return st;
}

}  // namespace gpusched::agent
