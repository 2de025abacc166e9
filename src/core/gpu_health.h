#pragma once
// GPU health on a node: the faults an agent sees (NVML Xid and ECC events, a GPU that is
// lost, or a fault injected for tests through `gpusched agent --fault-file`), and when a GPU
// that had one may take tasks again. Pure: times are passed in, so the agent drives it with
// its clock and tests with a fake one.
//
// The rule: a fault makes the GPU unhealthy at once. It is healthy again once its health
// checks (NVML queries on a real GPU; nothing to fail on a simulated one) have passed for
// the whole health period since the later of its last fault and its last failed check. So
// nothing stays unhealthy forever: a GPU stays out only while it keeps failing.
//
// Thread-safety: none (the agent's heartbeat thread owns it).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace gpusched::core {

struct GpuFault {
  int gpu = 0;
  std::string error;  // as shown: "Xid 79", "ECC uncorrectable errors: 2", "GPU lost"
};

// The --fault-file format, one fault per line, blank lines and `#` comments ignored:
//   GPU xid CODE      an Xid error (CODE 1..65535)
//   GPU ecc [COUNT]   uncorrectable ECC errors (COUNT >= 1, default 1)
//   GPU lost          the GPU fell off the bus
// GPU is the index on the node (0..gpus-1). Errors name the line, the field and the value.
StatusOr<std::vector<GpuFault>> ParseGpuFaults(std::string_view text, int gpus);

struct GpuHealthView {
  bool healthy = true;
  std::string last_error;  // the latest fault, kept after the GPU returns; "" = none
};

class GpuHealthTracker {
 public:
  GpuHealthTracker(int gpus, DurationMs period_ms);

  void Fault(const GpuFault& fault, TimeMs now);
  // The outcome of one health check of `gpu`; a failed check restarts its period.
  void Checked(int gpu, bool passed, TimeMs now);
  // Every GPU's health at `now`, in index order.
  std::vector<GpuHealthView> Snapshot(TimeMs now);

 private:
  struct Gpu {
    bool healthy = true;
    TimeMs bad_since = 0;  // the last fault or failed check
    std::string last_error;
  };
  DurationMs period_ms_;
  std::vector<Gpu> gpus_;
};

}  // namespace gpusched::core
