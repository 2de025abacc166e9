// Sizes and durations as users type them (base/units.h: "80GiB", "1.5GiB", "30s", "250ms").
// What parses is within the documented range, and a size that prints exactly (whole GiB,
// or under 1 GiB) parses back to itself.

#include <string>

#include "base/units.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  const std::string_view text = fuzz::Text(data, size);
  const std::string shown(text);
  if (auto mib = ParseSizeMiB(text, "gpu_mem"); mib.ok()) {
    FUZZ_REQUIRE(*mib >= 0 && *mib <= 1'000'000'000'000, shown);
    const std::string printed = FormatSizeMiB(*mib);
    if (*mib < 1024 || *mib % 1024 == 0) {
      auto back = ParseSizeMiB(printed, "gpu_mem");
      FUZZ_REQUIRE(back.ok() && *back == *mib, shown + " -> " + printed);
    }
  } else {
    FUZZ_REQUIRE(mib.status().code() == StatusCode::kInvalidArgument, mib.status().ToString());
    FUZZ_REQUIRE(mib.status().message().starts_with("gpu_mem: "), mib.status().ToString());
  }
  if (auto ms = ParseDurationMs(text, "duration"); ms.ok()) {
    FUZZ_REQUIRE(*ms >= 0 && *ms <= 1'000'000'000'000'000, shown);
    (void)FormatDurationMs(*ms);
  } else {
    FUZZ_REQUIRE(ms.status().code() == StatusCode::kInvalidArgument, ms.status().ToString());
    FUZZ_REQUIRE(ms.status().message().starts_with("duration: "), ms.status().ToString());
  }
  constexpr int64_t kNow = 1'800'000'000'000;  // 2027
  if (auto at = ParseTimePointMs(text, "since", kNow); at.ok()) {
    FUZZ_REQUIRE(*at >= kNow - 1'000'000'000'000'000 && *at < 253'402'300'800'000, shown);
  } else {
    FUZZ_REQUIRE(at.status().code() == StatusCode::kInvalidArgument, at.status().ToString());
    FUZZ_REQUIRE(at.status().message().starts_with("since: "), at.status().ToString());
  }
  return 0;
}
