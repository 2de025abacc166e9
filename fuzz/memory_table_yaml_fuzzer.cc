// The GPU-memory table (`--memory-table FILE`, spec::LoadMemoryTableYaml; CN109992422A
// claim 1). A table either loads or is rejected without changing the table it was to extend.
// A loaded table is then asked for estimates the way admission asks: for every row's
// profile, and for each row's model with the largest profile admission lets through
// (core/task_validation.h), so a formula that loads must also give a sane estimate there.
// The same bytes are also read as `submit --profile` (spec/profile_flag.h): what parses is
// within admission's bounds, and errors name the flag.

#include "core/memory_table.h"
#include "core/task_validation.h"
#include "fuzz/fuzz_check.h"
#include "spec/profile_flag.h"
#include "spec/spec_yaml.h"

namespace {

using namespace gpusched;

void CheckEstimate(const core::GpuMemoryTable& table, const core::MemoryProfile& p) {
  auto e = table.Estimate(p);
  if (!e.ok()) {
    FUZZ_REQUIRE(e.status().code() == StatusCode::kInvalidArgument, e.status().ToString());
    return;
  }
  FUZZ_REQUIRE(e->mib >= 0, e->source + " " + std::to_string(e->mib));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (auto p = spec::ParseProfileFlag(fuzz::Text(data, size), "--profile"); p.ok()) {
    FUZZ_REQUIRE(!p->model.empty() && p->batch >= 1 && p->batch <= 1'000'000, p->model);
    FUZZ_REQUIRE(p->height >= 0 && p->height <= 1'000'000, std::to_string(p->height));
    FUZZ_REQUIRE(p->width >= 0 && p->width <= 1'000'000, std::to_string(p->width));
  } else {
    FUZZ_REQUIRE(p.status().code() == StatusCode::kInvalidArgument, p.status().ToString());
    FUZZ_REQUIRE(p.status().message().starts_with("--profile: "), p.status().ToString());
  }
  core::GpuMemoryTable table;
  const core::MemoryRow kept{{"train", "kept", 1, 0, 0}, 100};
  FUZZ_REQUIRE(table.AddRow(kept).ok(), "seed row");
  const Status s = spec::LoadMemoryTableYaml(fuzz::Text(data, size), "table.yaml", &table);
  if (!s.ok()) {
    FUZZ_REQUIRE(s.code() == StatusCode::kInvalidArgument, s.ToString());
    FUZZ_REQUIRE(s.message().starts_with("table.yaml"), s.ToString());
    FUZZ_REQUIRE(table.rows().size() == 1, "a rejected table changed the table");
    return 0;
  }
  constexpr int64_t kMaxDim = 1'000'000;  // ValidateTaskSpec's bound on batch, height, width
  for (const core::MemoryRow& row : table.rows()) {
    FUZZ_REQUIRE(row.mib > 0, std::to_string(row.mib));
    CheckEstimate(table, row.profile);
    // No row matches this task type, so the estimate comes from the model's formula.
    CheckEstimate(table, {"fuzz-probe", row.profile.model, kMaxDim, kMaxDim, kMaxDim});
    CheckEstimate(table, {"fuzz-probe", row.profile.model, 1, 0, 0});
  }
  return 0;
}
