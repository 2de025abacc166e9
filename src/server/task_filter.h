#pragma once
// Which tasks a listing keeps (issue 41): `gpusched ls --user/--team/--name/--node`, the gRPC
// ListTasksRequest's filters and REST's `GET /api/v1/tasks?user=&team=&name=&node=`, one rule
// for all three doors.

#include <string>

#include "gpusched/v1/gpusched.pb.h"

namespace gpusched::server {

struct TaskFilter {
  std::string user, team;  // the owner as accounting names it ("default" when none)
  std::string name;        // exactly, or an array's NAME[i]
  std::string node;        // where it runs or last ran, or any rank's node of a gang
};

// Every field given ("" = any) matches.
bool MatchesTaskFilter(const v1::Task& t, const TaskFilter& f);

}  // namespace gpusched::server
