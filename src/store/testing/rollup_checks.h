#pragma once
// Issue 38: the rollup rows' contract (store/state_store.h LoadRollups), checked the same way
// against every StateStore (the memory and SQLite suites in sqlite_store_test.cc, etcd's in
// etcd_store_test.cc).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/state_store.h"

namespace gpusched::store::testing {

inline RollupRow Rollup(int64_t day, std::string team, std::string user, std::string failure,
                        int hour, int64_t gpu_micro_ms) {
  RollupRow r;
  r.day = day;
  r.team = std::move(team);
  r.user = std::move(user);
  r.failure = std::move(failure);
  r.hours[static_cast<size_t>(hour)] = {gpu_micro_ms, gpu_micro_ms / 2, 1};
  return r;
}

// Rows are written whole (a second write replaces the first), read by [from, to) days in
// (day, team, user, failure) order, names holding '/' and '%' kept apart, and a commit of
// rows with a task's deletion is one commit.
inline void ExpectRollupsReadBack(StateStore& store) {
  WriteBatch first;
  first.rollups = {Rollup(20'001, "vision", "ann", "none", 3, 7),
                   Rollup(20'000, "nlp", "bob", "exit", 23, 5),
                   Rollup(20'000, "a/b", "c", "none", 0, 1),
                   Rollup(20'000, "a", "b/c", "none", 0, 2),
                   Rollup(20'000, "a%2Fb", "c", "none", 0, 3),
                   Rollup(20'003, "vision", "ann", "none", 0, 9)};
  ASSERT_TRUE(store.Commit(first).ok());
  WriteBatch second;
  second.rollups = {Rollup(20'001, "vision", "ann", "none", 4, 11)};  // replaces the row
  ASSERT_TRUE(store.Commit(second).ok());
  auto rows = store.LoadRollups(20'000, 20'003);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  std::vector<std::string> order;
  for (const RollupRow& r : *rows) order.push_back(std::to_string(r.day) + " " + r.team + " " +
                                                   r.user + " " + r.failure);
  EXPECT_EQ(order, (std::vector<std::string>{"20000 a b/c none", "20000 a%2Fb c none",
                                             "20000 a/b c none", "20000 nlp bob exit",
                                             "20001 vision ann none"}));
  ASSERT_EQ(rows->size(), 5u);
  EXPECT_EQ((*rows)[4], second.rollups[0]) << "not replaced whole";
  EXPECT_EQ((*rows)[0], first.rollups[3]);
  EXPECT_EQ((*rows)[3].hours[23].gpu_micro_ms, 5);
  auto none = store.LoadRollups(20'002, 20'003);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto all = store.LoadRollups(0, 1'000'000);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 6u);
}

}  // namespace gpusched::store::testing
