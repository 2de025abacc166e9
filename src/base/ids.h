#pragma once
// Strong integer ids, so a TaskId can never be passed where a NodeId is expected.
// Ids are ordered: every tie in gpusched is broken by the lowest id.

#include <compare>
#include <cstdint>
#include <functional>
#include <string>

namespace gpusched {

template <typename Tag>
class StrongId {
 public:
  constexpr StrongId() = default;
  constexpr explicit StrongId(uint64_t v) : value_(v) {}
  constexpr uint64_t value() const { return value_; }
  constexpr bool valid() const { return value_ != 0; }
  constexpr auto operator<=>(const StrongId&) const = default;
  std::string ToString() const { return std::to_string(value_); }

 private:
  uint64_t value_ = 0;  // 0 is "no id"
};

struct TaskIdTag {};
using TaskId = StrongId<TaskIdTag>;

}  // namespace gpusched

template <typename Tag>
struct std::hash<gpusched::StrongId<Tag>> {
  size_t operator()(const gpusched::StrongId<Tag>& id) const noexcept {
    return std::hash<uint64_t>()(id.value());
  }
};
