// The agent's --fault-file (core/gpu_health.h: "1 xid 79", "0 ecc 2", "3 lost"). What parses
// names a GPU of the node and a non-empty error; what does not is InvalidArgument naming the
// line.

#include <string>

#include "core/gpu_health.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  const std::string_view text = fuzz::Text(data, size);
  constexpr int kGpus = 8;
  auto faults = core::ParseGpuFaults(text, kGpus);
  if (faults.ok()) {
    core::GpuHealthTracker tracker(kGpus, 1000);
    for (const core::GpuFault& f : *faults) {
      FUZZ_REQUIRE(f.gpu >= 0 && f.gpu < kGpus, std::to_string(f.gpu));
      FUZZ_REQUIRE(!f.error.empty(), std::string(text));
      tracker.Fault(f, 0);
    }
    // Every GPU is back once the period has passed with no further fault.
    for (const core::GpuHealthView& v : tracker.Snapshot(1000)) FUZZ_REQUIRE(v.healthy, "");
  } else {
    FUZZ_REQUIRE(faults.status().code() == StatusCode::kInvalidArgument,
                 faults.status().ToString());
    FUZZ_REQUIRE(faults.status().message().starts_with("fault-file line "),
                 faults.status().ToString());
  }
  return 0;
}
