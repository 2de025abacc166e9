#include "server/task_filter.h"

#include <algorithm>

#include "server/accounting.h"

namespace gpusched::server {

bool MatchesTaskFilter(const v1::Task& t, const TaskFilter& f) {
  const TaskOwner owner = OwnerOf(t);
  if (!f.user.empty() && owner.user != f.user) return false;
  if (!f.team.empty() && owner.team != f.team) return false;
  if (!f.name.empty() && t.name() != f.name) {
    const std::string& n = t.name();
    const bool element = t.has_array() && n.size() > f.name.size() &&
                         n.compare(0, f.name.size(), f.name) == 0 && n[f.name.size()] == '[';
    if (!element) return false;
  }
  if (!f.node.empty() && t.node() != f.node &&
      std::find(t.gang_nodes().begin(), t.gang_nodes().end(), f.node) == t.gang_nodes().end()) {
    return false;
  }
  return true;
}

}  // namespace gpusched::server
