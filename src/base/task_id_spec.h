#pragma once
// How users name tasks on the command line (issue 41): one task, a range of ids, a whole job
// array or one index of it. Text only: which ids exist is the server's to say.
//
//   "12"     task 12
//   "12-20"  ids 12 to 20 (1 <= A <= B)
//   "12.*"   the job array whose id (its first task's id) is 12
//   "12.3"   that array's index 3 (>= 0)

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace gpusched {

struct TaskIdSpec {
  enum class Kind { kId, kRange, kArray, kArrayIndex };
  Kind kind = Kind::kId;
  uint64_t first = 0;  // the id, a range's first id, or the array's id
  uint64_t last = 0;   // a range's last id; `first` otherwise
  int64_t index = -1;  // kArrayIndex: the index; -1 otherwise
};

// InvalidArgument naming `field` and the text when it is none of the forms above.
StatusOr<TaskIdSpec> ParseTaskIdSpec(std::string_view text, std::string_view field);

}  // namespace gpusched
