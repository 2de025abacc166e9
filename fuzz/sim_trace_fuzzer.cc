// The simulator's trace loaders (sim::ParseTrace), one input read in each of the four
// formats (csv, philly, philly-rfold, alibaba; the header decides which can accept it), with
// and without skip_bad_lines. What loads must keep sim/trace.h's promises: jobs sorted by
// (submit time, line), no negative GPU count, resources or duration, a GPU share in (0, 1000].

#include <sstream>
#include <string>

#include "fuzz/fuzz_check.h"
#include "sim/policy.h"
#include "sim/trace.h"

namespace {

using namespace gpusched;

void CheckTrace(const sim::Trace& trace, const std::string& format) {
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    const sim::TraceJob& j = trace.jobs[i];
    const std::string where = format + " line " + std::to_string(j.line);
    FUZZ_REQUIRE(j.num_gpu >= 0, where);
    FUZZ_REQUIRE(j.gpu_milli > 0 && j.gpu_milli <= 1000, where);
    FUZZ_REQUIRE(j.gpu_mem_mib >= 0 && j.cpu_milli >= 0 && j.mem_mib >= 0, where);
    FUZZ_REQUIRE(j.duration_ms >= 0, where + ": duration_ms " + std::to_string(j.duration_ms));
    if (i > 0) {
      const sim::TraceJob& prev = trace.jobs[i - 1];
      FUZZ_REQUIRE(prev.submit_ms < j.submit_ms ||
                       (prev.submit_ms == j.submit_ms && prev.line < j.line),
                   where + ": not sorted");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fuzz::Text(data, size));
  for (sim::TraceFormat format : {sim::TraceFormat::kCsv, sim::TraceFormat::kPhilly,
                                  sim::TraceFormat::kPhillyRfold, sim::TraceFormat::kAlibaba}) {
    for (bool skip : {false, true}) {
      std::istringstream in(text);
      auto trace = sim::ParseTrace(in, "trace.csv", format, {.skip_bad_lines = skip});
      if (!trace.ok()) {
        FUZZ_REQUIRE(trace.status().code() == StatusCode::kInvalidArgument,
                     trace.status().ToString());
        FUZZ_REQUIRE(trace.status().message().starts_with("trace.csv:"), trace.status().ToString());
        continue;
      }
      CheckTrace(*trace, sim::TraceFormatName(format));
    }
  }
  // `sim --priority VC=CLASS`: an accepted value splits at its first '=' into a non-empty VC
  // and one of the classes; anything else is an error naming the flag.
  auto vc = sim::ParseVcPriority(text, core::SchedulerConfig().priority_classes);
  if (vc.ok()) {
    FUZZ_REQUIRE(!vc->first.empty() && vc->first + "=" + vc->second == text, text);
    FUZZ_REQUIRE(core::SchedulerConfig().PriorityOf(vc->second).has_value(), text);
  } else {
    FUZZ_REQUIRE(vc.status().code() == StatusCode::kInvalidArgument, vc.status().ToString());
    FUZZ_REQUIRE(vc.status().message().starts_with("--priority: "), vc.status().ToString());
  }
  return 0;
}
