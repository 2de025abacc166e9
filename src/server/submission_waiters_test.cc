// The submitters waiting for their commit (submission_waiters.h), and the submissions stored
// in parts (split_submissions.h, issue 38), driven directly.

#include "server/submission_waiters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "server/split_submissions.h"

namespace gpusched::server {
namespace {

// Records what each named submitter was answered.
struct Answers {
  std::map<std::string, SubmissionWaiters::Result> got;
  SubmitManyDone For(const std::string& who) {
    return [this, who](SubmissionWaiters::Result r) { got.emplace(who, std::move(r)); };
  }
  void Call(SubmissionWaiters& w) {
    for (auto& [done, result] : w.TakeAnswers()) done(std::move(result));
  }
};

std::vector<TaskId> Ids(std::initializer_list<uint64_t> v) {
  std::vector<TaskId> out;
  for (uint64_t x : v) out.push_back(TaskId(x));
  return out;
}

TEST(SubmissionWaitersTest, Issue40_ACommitAnswersItsRequestAndTheRetriesWaitingOnIt) {
  SubmissionWaiters w;
  Answers a;
  w.Await(TaskId(5), a.For("first"), 3);  // tasks 5, 6, 7
  w.Await(TaskId(5), a.For("retry"), 3);  // the same key, racing the commit
  w.Await(TaskId(9), a.For("other"), 1);
  EXPECT_EQ(w.waiting(), 3u);
  a.Call(w);
  EXPECT_TRUE(a.got.empty());  // nothing stored yet: nobody answered
  w.Committed(TaskId(5));
  EXPECT_EQ(w.waiting(), 1u);
  a.Call(w);
  ASSERT_EQ(a.got.size(), 2u);
  EXPECT_EQ(*a.got.at("first"), Ids({5, 6, 7}));
  EXPECT_EQ(*a.got.at("retry"), Ids({5, 6, 7}));
}

TEST(SubmissionWaitersTest, Issue40_AFailedCommitAnswersNotStoredAndReturnsEveryIdOfItsRequests) {
  SubmissionWaiters w;
  Answers a;
  w.Await(TaskId(5), a.For("first"), 2);
  w.Await(TaskId(9), a.For("other"), 1);
  EXPECT_EQ(w.Failed(TaskId(5), NotStored("disk full")), Ids({5, 6}));
  EXPECT_TRUE(w.Failed(TaskId(7), NotStored("x")).empty());  // nobody waits on 7
  a.Call(w);
  ASSERT_EQ(a.got.size(), 1u);
  EXPECT_EQ(a.got.at("first").status().code(), StatusCode::kNotStored);
  EXPECT_EQ(w.waiting(), 1u);  // "other" still waits
}

TEST(SubmissionWaitersTest, Issue40_AnswersAreKeptInTheOrderDecidedUntilTaken) {
  SubmissionWaiters w;
  std::vector<std::string> order;
  w.Decide([&](SubmissionWaiters::Result) { order.push_back("a"); }, Ids({1}));
  w.Decide([&](SubmissionWaiters::Result) { order.push_back("b"); }, Unavailable("busy"));
  EXPECT_TRUE(w.has_answers());
  for (auto& [done, result] : w.TakeAnswers()) done(std::move(result));
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(w.has_answers());
}

TEST(SubmissionWaitersTest, Issue40_AbandoningAnswersEveryWaiterOnceAndReturnsTheirIds) {
  SubmissionWaiters w;
  Answers a;
  w.Await(TaskId(5), a.For("first"), 2);
  w.Await(TaskId(9), a.For("other"), 1);
  std::vector<TaskId> ids = w.AbandonAll(NotStored("stopping"));
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, Ids({5, 6, 9}));
  EXPECT_EQ(w.waiting(), 0u);
  a.Call(w);
  EXPECT_EQ(a.got.size(), 2u);
  w.Committed(TaskId(5));  // too late: nobody is answered twice
  EXPECT_FALSE(w.has_answers());
}

}  // namespace
}  // namespace gpusched::server

namespace gpusched::server {
namespace {

TEST(SplitSubmissionsTest, Issue38_PartKeysCannotBeSubmittedAndPartsAreFoundByTask) {
  EXPECT_TRUE(SplitSubmissions::ValidKey("plain-key").ok());
  const std::string part = SplitSubmissions::PartKey("k", 2);
  Status refused = SplitSubmissions::ValidKey(part);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("idempotency_key"), std::string::npos) << refused.ToString();
  SplitSubmissions splits;
  splits.Add(TaskId(10), 5);
  EXPECT_EQ(splits.Find(TaskId(9)), nullptr);
  ASSERT_NE(splits.Find(TaskId(14)), nullptr);
  EXPECT_EQ(splits.Find(TaskId(14))->first, TaskId(10));
  EXPECT_EQ(splits.Find(TaskId(15)), nullptr);
  const Status partly = SplitSubmissions::Partly(TaskId(10), 5, 2, "disk full");
  EXPECT_EQ(partly.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(partly.message().find("tasks 10-11 (the first 2 of 5) are queued, tasks 12-14"),
            std::string::npos)
      << partly.ToString();
}

}  // namespace
}  // namespace gpusched::server
