// Team quota flags as users type them (core/quota.h: `gpusched sim --quota TEAM=GPUS[:BORROW]`,
// `gpusched quota set --gpus N --borrow M`). What parses is a valid quota; what does not is an
// InvalidArgument naming the flag.

#include <string>

#include "core/quota.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  const std::string_view text = fuzz::Text(data, size);
  const std::string shown(text);
  if (auto q = core::ParseTeamQuota(text); q.ok()) {
    FUZZ_REQUIRE(q->Validate().ok(), shown);
    FUZZ_REQUIRE(q->guaranteed_gpus >= 0 && !q->team.empty(), shown);
    FUZZ_REQUIRE(q->borrow_gpus >= 0 || q->borrow_gpus == core::kUnlimitedBorrow, shown);
  } else {
    FUZZ_REQUIRE(q.status().code() == StatusCode::kInvalidArgument, q.status().ToString());
    FUZZ_REQUIRE(q.status().message().starts_with("--quota: "), q.status().ToString());
  }
  for (bool unlimited : {false, true}) {
    if (auto n = core::ParseGpuCount(text, "--borrow", unlimited); n.ok()) {
      FUZZ_REQUIRE((*n >= 0 && *n <= 1'000'000) || (unlimited && *n == core::kUnlimitedBorrow),
                   shown);
    } else {
      FUZZ_REQUIRE(n.status().message().starts_with("--borrow: "), n.status().ToString());
    }
  }
  return 0;
}
