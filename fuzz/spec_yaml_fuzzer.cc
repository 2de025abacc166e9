// Task specs (`gpusched submit -f job.yaml`, spec::ParseTaskSpecYaml), then the admission
// check a parsed spec meets next (core::ValidateTaskSpec). Any text is either a spec or an
// InvalidArgument naming the file; sizes and durations that parse are never negative.

#include "core/task_validation.h"
#include "fuzz/fuzz_check.h"
#include "spec/spec_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  auto spec = spec::ParseTaskSpecYaml(fuzz::Text(data, size), "job.yaml");
  if (!spec.ok()) {
    FUZZ_REQUIRE(spec.status().code() == StatusCode::kInvalidArgument, spec.status().ToString());
    FUZZ_REQUIRE(spec.status().message().starts_with("job.yaml"), spec.status().ToString());
    return 0;
  }
  FUZZ_REQUIRE(spec->gpu_mem_mib >= 0, std::to_string(spec->gpu_mem_mib));
  FUZZ_REQUIRE(spec->resources.mem_mib >= 0, std::to_string(spec->resources.mem_mib));
  FUZZ_REQUIRE(!spec->duration_ms || *spec->duration_ms >= 0, std::to_string(*spec->duration_ms));
  const Status valid = core::ValidateTaskSpec(*spec);
  FUZZ_REQUIRE(valid.ok() || valid.code() == StatusCode::kInvalidArgument, valid.ToString());
  return 0;
}
