// A task's stop signal as users type it (core/stop_signal.h): `submit --signal NAME|NUM`, a
// job file's `signal:` (issue 37). Errors are InvalidArgument naming the flag; what parses is
// an allowed signal whose name parses back to the same number.

#include <string>

#include "core/stop_signal.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  const std::string_view text = fuzz::Text(data, size);
  const std::string shown(text);
  StatusOr<int> sig = core::ParseStopSignal(text, "--signal");
  if (!sig.ok()) {
    FUZZ_REQUIRE(sig.status().code() == StatusCode::kInvalidArgument, sig.status().ToString());
    FUZZ_REQUIRE(sig.status().message().starts_with("--signal: "), sig.status().ToString());
    return 0;
  }
  FUZZ_REQUIRE(core::CheckStopSignal(*sig, "--signal").ok(), shown);
  const std::string name = core::StopSignalName(*sig);
  StatusOr<int> back = core::ParseStopSignal(name.starts_with("SIGRTMIN+")
                                                 ? std::to_string(*sig) : name,
                                             "--signal");
  FUZZ_REQUIRE(back.ok() && *back == *sig, shown + " -> " + name);
  return 0;
}
