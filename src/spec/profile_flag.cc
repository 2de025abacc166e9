#include "spec/profile_flag.h"

#include <charconv>
#include <optional>
#include <string>

namespace gpusched::spec {
namespace {

// A whole number in [min, 1'000'000] (ValidateTaskSpec's bounds), or nullopt.
std::optional<int64_t> Whole(std::string_view s, int64_t min) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < min || v > 1'000'000) {
    return std::nullopt;
  }
  return v;
}

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
      const auto batch = Whole(value, 1);
      if (!batch) {
        return InvalidArgument(head + "batch \"" + std::string(value) +
                               "\" is not a whole number from 1 to 1000000");
      }
      p.batch = *batch;
    } else if (key == "size") {
      const size_t x = value.find('x');
      const auto h = Whole(value.substr(0, x), 1);
      const auto w = x == std::string_view::npos ? std::nullopt : Whole(value.substr(x + 1), 1);
      if (!h || !w) {
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

}  // namespace gpusched::spec
