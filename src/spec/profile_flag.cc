#include "spec/profile_flag.h"

#include <string>

#include "base/units.h"

namespace gpusched::spec {
namespace {

// ValidateTaskSpec's bounds for batch, height and width.
StatusOr<int64_t> Whole(std::string_view s) { return ParseWholeNumber(s, 1, 1'000'000, "profile"); }

}  // namespace

StatusOr<core::MemoryProfile> ParseProfileFlag(std::string_view text, std::string_view flag) {
  const std::string head = std::string(flag) + ": \"" + std::string(text) + "\": ";
  core::MemoryProfile p;
  size_t at = text.find(',');
  p.model = std::string(text.substr(0, at));
  if (p.model.empty() || p.model.find('=') != std::string::npos) {
    return InvalidArgument(head + "begin with the model, e.g. resnet50,batch=32");
  }
  while (at != std::string_view::npos) {
    const size_t next = text.find(',', at + 1);
    const std::string_view item = text.substr(at + 1, next - at - 1);
    at = next;
    const size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    if (key == "type" && !value.empty()) {
      p.task_type = std::string(value);
    } else if (key == "batch") {
      const auto batch = Whole(value);
      if (!batch.ok()) {
        return InvalidArgument(head + "batch \"" + std::string(value) +
                               "\" is not a whole number from 1 to 1000000");
      }
      p.batch = *batch;
    } else if (key == "size") {
      const auto hw = SplitCountSpec(value, 2, 2, "size", "HEIGHTxWIDTH");
      const auto h = hw.ok() ? Whole((*hw)[0]) : StatusOr<int64_t>(hw.status());
      const auto w = hw.ok() ? Whole((*hw)[1]) : StatusOr<int64_t>(hw.status());
      if (!h.ok() || !w.ok()) {
        return InvalidArgument(head + "size \"" + std::string(value) +
                               "\" is not HEIGHTxWIDTH in pixels, e.g. 224x224");
      }
      p.height = *h;
      p.width = *w;
    } else {
      return InvalidArgument(head + "\"" + std::string(item) +
                             "\" is not type=T, batch=N or size=HxW");
    }
  }
  return p;
}

std::string FormatProfileFlag(const core::MemoryProfile& p) {
  std::string out = p.model;
  if (!p.task_type.empty()) out += ",type=" + p.task_type;
  if (p.batch != 1) out += ",batch=" + std::to_string(p.batch);
  if (p.height != 0 || p.width != 0) {
    out += ",size=" + std::to_string(p.height) + "x" + std::to_string(p.width);
  }
  return out;
}

}  // namespace gpusched::spec
