// Sizes, durations and CPU amounts as users type them (base/units.h: "80GiB", "1.5GiB",
// "30s", "250ms", "500m"), NxG counts ("8x80GiB"), job-array ranges ("0-999") and HOST:PORT
// addresses (base/host_port.h), and task id specs ("12", "12-20", "12.*", "12.3":
// base/task_id_spec.h; what parses prints back to itself). What parses is within the documented range, and a size that prints
// exactly (whole GiB, or under 1 GiB) parses back to itself; an address prints and parses
// back to itself; errors name the field.

#include <string>

#include "base/host_port.h"
#include "base/task_id_spec.h"
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
  if (auto milli = ParseCpuMilli(text, "cpu"); milli.ok()) {
    FUZZ_REQUIRE(*milli >= 0 && *milli <= 1'000'000'000'000'000, shown);
  } else {
    FUZZ_REQUIRE(milli.status().code() == StatusCode::kInvalidArgument,
                 milli.status().ToString());
    FUZZ_REQUIRE(milli.status().message().starts_with("cpu: "), milli.status().ToString());
  }
  constexpr int64_t kNow = 1'800'000'000'000;  // 2027
  if (auto at = ParseTimePointMs(text, "since", kNow); at.ok()) {
    FUZZ_REQUIRE(*at >= kNow - 1'000'000'000'000'000 && *at < 253'402'300'800'000, shown);
  } else {
    FUZZ_REQUIRE(at.status().code() == StatusCode::kInvalidArgument, at.status().ToString());
    FUZZ_REQUIRE(at.status().message().starts_with("since: "), at.status().ToString());
  }
  if (auto parts = SplitCountSpec(text, 2, 3, "cluster", "NxG[xMEM]"); parts.ok()) {
    FUZZ_REQUIRE(parts->size() >= 2 && parts->size() <= 3, shown);
    for (std::string_view p : *parts) {
      FUZZ_REQUIRE(!p.empty() && p.find('x') == std::string_view::npos, shown);
    }
  } else {
    FUZZ_REQUIRE(parts.status().message().starts_with("cluster: "), parts.status().ToString());
  }
  if (auto n = ParseWholeNumber(text, 1, 1'000'000, "N"); n.ok()) {
    FUZZ_REQUIRE(*n >= 1 && *n <= 1'000'000 && std::to_string(*n).size() <= text.size(), shown);
  } else {
    FUZZ_REQUIRE(n.status().message().starts_with("N: "), n.status().ToString());
  }
  if (auto r = ParseIndexRange(text, 10'000, "--array"); r.ok()) {
    FUZZ_REQUIRE(r->first >= 0 && r->first <= r->last && r->count() <= 10'000, shown);
  } else {
    FUZZ_REQUIRE(r.status().code() == StatusCode::kInvalidArgument, r.status().ToString());
    FUZZ_REQUIRE(r.status().message().starts_with("--array: "), r.status().ToString());
  }
  if (auto hp = ParseHostPort(text, "listen", /*allow_empty_host=*/true); hp.ok()) {
    FUZZ_REQUIRE(hp->port >= 0 && hp->port <= 65535, shown);
    auto back = ParseHostPort(FormatHostPort(hp->host, hp->port), "listen", true);
    FUZZ_REQUIRE(back.ok() && back->host == hp->host && back->port == hp->port, shown);
  } else {
    FUZZ_REQUIRE(hp.status().code() == StatusCode::kInvalidArgument, hp.status().ToString());
    FUZZ_REQUIRE(hp.status().message().starts_with("listen: "), hp.status().ToString());
  }
  if (auto spec = ParseTaskIdSpec(text, "id"); spec.ok()) {
    using Kind = TaskIdSpec::Kind;
    FUZZ_REQUIRE(spec->first >= 1 && spec->first <= spec->last, shown);
    FUZZ_REQUIRE(spec->kind == Kind::kRange || spec->first == spec->last, shown);
    FUZZ_REQUIRE((spec->kind == Kind::kArrayIndex) == (spec->index >= 0), shown);
    const std::string a = std::to_string(spec->first), b = std::to_string(spec->last);
    const std::string printed = spec->kind == Kind::kId      ? a
                                : spec->kind == Kind::kRange ? a + "-" + b
                                : spec->kind == Kind::kArray ? a + ".*"
                                                             : a + "." + std::to_string(spec->index);
    auto back = ParseTaskIdSpec(printed, "id");
    FUZZ_REQUIRE(back.ok() && back->kind == spec->kind && back->first == spec->first &&
                     back->last == spec->last && back->index == spec->index,
                 shown + " -> " + printed);
  } else {
    FUZZ_REQUIRE(spec.status().code() == StatusCode::kInvalidArgument, spec.status().ToString());
    FUZZ_REQUIRE(spec.status().message().starts_with("id: \""), spec.status().ToString());
  }
  return 0;
}
