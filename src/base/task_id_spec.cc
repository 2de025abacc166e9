#include "base/task_id_spec.h"

#include <charconv>
#include <optional>
#include <string>

namespace gpusched {
namespace {

// Decimal digits only (no sign, no spaces), at least `min`; nullopt otherwise or on overflow.
std::optional<int64_t> Whole(std::string_view text, int64_t min) {
  if (text.empty() || text.size() > 18) return std::nullopt;  // below INT64_MAX, always
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min) return std::nullopt;
  return v;
}

Status Refuse(std::string_view text, std::string_view field) {
  return InvalidArgument(std::string(field) + ": \"" + std::string(text) +
                         "\" is not a task id (a number >= 1), a range A-B, ARRAY.* or "
                         "ARRAY.INDEX");
}

}  // namespace

StatusOr<TaskIdSpec> ParseTaskIdSpec(std::string_view text, std::string_view field) {
  TaskIdSpec out;
  if (const size_t dot = text.find('.'); dot != std::string_view::npos) {
    const std::optional<int64_t> array = Whole(text.substr(0, dot), 1);
    const std::string_view rest = text.substr(dot + 1);
    if (!array) return Refuse(text, field);
    out.first = out.last = static_cast<uint64_t>(*array);
    if (rest == "*") {
      out.kind = TaskIdSpec::Kind::kArray;
      return out;
    }
    const std::optional<int64_t> index = Whole(rest, 0);
    if (!index) return Refuse(text, field);
    out.kind = TaskIdSpec::Kind::kArrayIndex;
    out.index = *index;
    return out;
  }
  if (const size_t dash = text.find('-'); dash != std::string_view::npos) {
    const std::optional<int64_t> from = Whole(text.substr(0, dash), 1);
    const std::optional<int64_t> to = Whole(text.substr(dash + 1), 1);
    if (!from || !to || *to < *from) return Refuse(text, field);
    out.kind = TaskIdSpec::Kind::kRange;
    out.first = static_cast<uint64_t>(*from);
    out.last = static_cast<uint64_t>(*to);
    return out;
  }
  const std::optional<int64_t> id = Whole(text, 1);
  if (!id) return Refuse(text, field);
  out.first = out.last = static_cast<uint64_t>(*id);
  return out;
}

}  // namespace gpusched
