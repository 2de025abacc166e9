#include "server/change_log.h"

#include <set>

namespace gpusched::server {

void ChangeLog::Add(uint64_t id) {
  log_.emplace_back(version_ + 1, id);
}

bool ChangeLog::Seal() {
  // Entries of the version being built, if any, are the newest (trimming takes the oldest).
  if (log_.empty() || log_.back().first <= version_) return false;
  ++version_;
  while (log_.size() > capacity_) log_.pop_front();
  return true;
}

std::vector<uint64_t> ChangeLog::Since(uint64_t since, bool& everything) const {
  everything = !log_.empty() && log_.front().first > since + 1;
  std::set<uint64_t> unique;
  for (auto it = log_.rbegin(); it != log_.rend() && it->first > since; ++it) {
    unique.insert(it->second);
  }
  return {unique.begin(), unique.end()};
}

}  // namespace gpusched::server
