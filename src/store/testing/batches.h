#pragma once

// Small builders of WriteBatch for the store's tests, shared by the SQLite and etcd suites
// (one definition, so that a unity build can compile them together).

#include <utility>
#include <vector>

#include "store/state_store.h"

namespace gpusched::store::testing {

// A batch of task records only.
inline WriteBatch Tasks(std::vector<TaskRecord> records) {
  WriteBatch b;
  b.tasks = std::move(records);
  return b;
}

}  // namespace gpusched::store::testing
