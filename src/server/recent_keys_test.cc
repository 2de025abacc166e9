// RecentKeys (issue 40: the control plane's idempotency keys, split out of ControlPlane):
// found while recent, held until the commit ends, forgotten when withdrawn, bounded with the
// oldest leaving first.

#include "server/recent_keys.h"

#include <gtest/gtest.h>

namespace gpusched::server {
namespace {

TEST(RecentKeysTest, Issue40_AKeyIsFoundUntilItsCommitFailsThenForgotten) {
  RecentKeys keys(10);
  keys.Remember("a", TaskId(7));
  EXPECT_EQ(keys.Find("a"), TaskId(7));
  EXPECT_EQ(keys.held(), 1u);
  EXPECT_EQ(keys.Withdraw(TaskId(7)), "a");
  EXPECT_EQ(keys.Find("a"), std::nullopt);
  EXPECT_EQ(keys.held(), 0u);
  EXPECT_EQ(keys.Withdraw(TaskId(7)), std::nullopt);  // once
  EXPECT_EQ(keys.Withdraw(TaskId(8)), std::nullopt);  // a submission without a key
}

TEST(RecentKeysTest, Issue40_ACommittedKeyStaysKnownAndCannotBeWithdrawn) {
  RecentKeys keys(10);
  keys.Remember("a", TaskId(7));
  keys.Committed(TaskId(7));
  EXPECT_EQ(keys.held(), 0u);
  EXPECT_EQ(keys.Withdraw(TaskId(7)), std::nullopt);
  EXPECT_EQ(keys.Find("a"), TaskId(7));
}

TEST(RecentKeysTest, Issue40_TheOldestKeysLeaveFirstPastTheBound) {
  RecentKeys keys(2);
  keys.Remember("a", TaskId(1));
  keys.Remember("b", TaskId(2));
  keys.Remember("c", TaskId(3));
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys.Find("a"), std::nullopt);
  EXPECT_EQ(keys.Find("b"), TaskId(2));
  EXPECT_EQ(keys.Find("c"), TaskId(3));
  // Evicted while held: its commit may still fail, and then the key must be dropped from
  // the pending write, so Withdraw still names it.
  EXPECT_EQ(keys.Withdraw(TaskId(1)), "a");
}

// The FIFO list that ControlPlane kept before forgot a key by name: a key withdrawn and then
// submitted again left its old place in the list behind, and when that place reached the
// front it erased the new submission's key while only `capacity` keys were known.
TEST(RecentKeysTest, Issue40_AKeySubmittedAgainAfterAFailedCommitIsNotForgottenByItsOldPlace) {
  RecentKeys keys(3);
  keys.Remember("a", TaskId(1));
  ASSERT_EQ(keys.Withdraw(TaskId(1)), "a");  // its commit failed
  keys.Remember("a", TaskId(2));               // the client retries with the same key
  keys.Remember("b", TaskId(3));
  keys.Remember("c", TaskId(4));
  EXPECT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys.Find("a"), TaskId(2));
  EXPECT_EQ(keys.Find("b"), TaskId(3));
  EXPECT_EQ(keys.Find("c"), TaskId(4));
  keys.Remember("d", TaskId(5));  // now "a" (the oldest live key) leaves
  EXPECT_EQ(keys.Find("a"), std::nullopt);
  EXPECT_EQ(keys.Find("d"), TaskId(5));
}

TEST(RecentKeysTest, Issue40_WithdrawingAnOlderSubmissionKeepsANewerOneWithItsKey) {
  RecentKeys keys(10);
  keys.Remember("a", TaskId(1));
  keys.Remember("a", TaskId(2));  // remembered anew (the control plane does not, but be safe)
  EXPECT_EQ(keys.Withdraw(TaskId(1)), "a");
  EXPECT_EQ(keys.Find("a"), TaskId(2));
}

}  // namespace
}  // namespace gpusched::server
