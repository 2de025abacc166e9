#include "server/rollups.h"

#include <algorithm>
#include <cmath>

namespace gpusched::server {
namespace {

constexpr int64_t kHourMs = 3'600'000;
constexpr int64_t kDayMs = 24 * kHourMs;

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

// The end of the task's last run; 0 when it has no run of positive length.
int64_t LastEnd(const TaskUsage& u) {
  int64_t end = 0;
  for (const auto& [from, to] : u.runs) {
    if (to > from) end = std::max(end, to);
  }
  return end;
}

}  // namespace

int64_t RollupDayOf(int64_t ms) { return FloorDiv(ms, kDayMs); }

int64_t RollupDaysFor(size_t max_ops) {
  return max_ops >= size_t(kMaxRollupDays) + 8 ? kMaxRollupDays
         : max_ops > 9                          ? static_cast<int64_t>(max_ops) - 8
                                                : 1;
}

std::pair<int64_t, int64_t> RollupSet::DaysOf(const TaskUsage& u) const {
  const int64_t end = LastEnd(u);
  if (end <= 0 || (u.gpus <= 0 && u.mem_mib <= 0)) return {0, -1};
  int64_t first = RollupDayOf(end - 1);
  for (const auto& [from, to] : u.runs) {
    if (to > from) first = std::min(first, RollupDayOf(from));
  }
  const int64_t last = RollupDayOf(end - 1);
  return {std::max(first, last - max_days_ + 1), last};
}

void RollupSet::Load(const std::vector<store::RollupRow>& rows) {
  for (const store::RollupRow& r : rows) rows_[Key(r.day, r.team, r.user, r.failure)] = r;
}

store::RollupRow& RollupSet::RowOf(int64_t day, const TaskUsage& u) {
  const Key key(day, u.owner.team, u.owner.user, u.failure);
  changed_.insert(key);
  store::RollupRow& row = rows_[key];
  row.day = day;
  row.team = u.owner.team;
  row.user = u.owner.user;
  row.failure = u.failure;
  return row;
}

void RollupSet::AddSpan(const TaskUsage& u, int64_t from, int64_t to) {
  for (int64_t hour = FloorDiv(from, kHourMs); hour * kHourMs < to; ++hour) {
    const int64_t lo = std::max(from, hour * kHourMs), hi = std::min(to, (hour + 1) * kHourMs);
    store::RollupRow& row = RowOf(FloorDiv(hour, 24), u);
    store::RollupSlot& slot = row.hours[static_cast<size_t>(hour - row.day * 24)];
    slot.gpu_micro_ms += std::llround(u.gpus * double(hi - lo) * 1e6);
    slot.gpu_mem_mib_ms += u.mem_mib * (hi - lo);
  }
}

void RollupSet::Add(const TaskUsage& u) {
  const auto [first, last] = DaysOf(u);
  if (first > last) return;
  const int64_t kept_from = first * kDayMs;  // before it: into the first kept hour
  for (const auto& [from, to] : u.runs) {
    if (to <= from) continue;
    if (from < kept_from) {
      store::RollupSlot& first_hour = RowOf(first, u).hours[0];
      const int64_t early = std::min(to, kept_from) - from;
      first_hour.gpu_micro_ms += std::llround(u.gpus * double(early) * 1e6);
      first_hour.gpu_mem_mib_ms += u.mem_mib * early;
    }
    if (to > kept_from) AddSpan(u, std::max(from, kept_from), to);
  }
  const int64_t end_hour = FloorDiv(LastEnd(u) - 1, kHourMs);
  RowOf(last, u).hours[static_cast<size_t>(end_hour - last * 24)].tasks += 1;
}

std::vector<store::RollupRow> RollupSet::Changed() const {
  std::vector<store::RollupRow> out;
  for (const Key& k : changed_) out.push_back(rows_.at(k));
  return out;
}

}  // namespace gpusched::server
