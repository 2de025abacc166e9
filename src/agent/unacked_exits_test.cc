// UnackedExits (issue 40: split out of Agent::Impl): the exits reported and not yet
// acknowledged, one per task attempt, as a registration carries them.

#include "agent/unacked_exits.h"

#include <gtest/gtest.h>

namespace gpusched::agent {
namespace {

namespace v1 = ::gpusched::v1;

v1::TaskStatus Finished(uint64_t id, int64_t attempt, int exit_code, TimeMs finished_ms) {
  v1::TaskStatus st;
  st.set_id(id);
  st.set_attempt(attempt);
  st.set_kind(v1::TaskStatus::FINISHED);
  st.set_exit_code(exit_code);
  st.set_finished_ms(finished_ms);
  return st;
}

// Kept per attempt until acknowledged; a second report of one attempt replaces the first,
// and an acknowledgement of another attempt forgets nothing.
TEST(UnackedExitsTest, Issue40_KeptPerAttemptUntilAcknowledged) {
  UnackedExits u;
  EXPECT_FALSE(u.Find({1, 1}));
  u.Keep(Finished(1, 1, 3, 100));
  u.Keep(Finished(1, 2, 0, 200));
  u.Keep(Finished(1, 1, 4, 150));
  EXPECT_EQ(u.Tasks(), (std::vector<TaskKey>{{1, 1}, {1, 2}}));
  std::optional<v1::TaskStatus> st = u.Find({1, 1});
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code(), 4);
  EXPECT_FALSE(u.Acknowledge({1, 3}));
  EXPECT_TRUE(u.Acknowledge({1, 1}));
  EXPECT_FALSE(u.Acknowledge({1, 1}));
  EXPECT_FALSE(u.Find({1, 1}));
  EXPECT_EQ(u.Tasks(), (std::vector<TaskKey>{{1, 2}}));
}

// The registration carries every kept exit with how long ago it ended on this node's clock
// (never negative; 0 for a status without an end), the kept status itself left unchanged.
TEST(UnackedExitsTest, Issue40_RegistrationCarriesEachWithEndedAgo) {
  UnackedExits u;
  u.Keep(Finished(7, 1, 1, 1'000));
  u.Keep(Finished(8, 1, 0, 5'000));  // "after" now: a step of the wall clock
  u.Keep(Finished(9, 1, 0, 0));
  v1::RegisterNode r;
  u.AddTo(&r, 4'000);
  ASSERT_EQ(r.finished_size(), 3);
  EXPECT_EQ(r.finished(0).id(), 7u);
  EXPECT_EQ(r.finished(0).exit_code(), 1);
  EXPECT_EQ(r.finished(0).ended_ago_ms(), 3'000);
  EXPECT_EQ(r.finished(1).ended_ago_ms(), 0);
  EXPECT_EQ(r.finished(2).ended_ago_ms(), 0);
  EXPECT_EQ(u.Find({7, 1})->ended_ago_ms(), 0);
  EXPECT_EQ(EndedAgoMs(Finished(7, 1, 1, 1'000), 1'250), 250);
}

// Issue 39: a cluster change takes every kept exit (the old cluster's) and leaves none.
TEST(UnackedExitsTest, Issue40_TakeAllLeavesNone) {
  UnackedExits u;
  u.Keep(Finished(2, 1, 0, 10));
  u.Keep(Finished(3, 4, 0, 10));
  EXPECT_EQ(u.TakeAll(), (std::vector<TaskKey>{{2, 1}, {3, 4}}));
  EXPECT_TRUE(u.Tasks().empty());
  v1::RegisterNode r;
  u.AddTo(&r, 100);
  EXPECT_EQ(r.finished_size(), 0);
  EXPECT_TRUE(u.TakeAll().empty());
}

}  // namespace
}  // namespace gpusched::agent
