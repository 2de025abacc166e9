// CommitPipeline (issue 40: the control plane's commit bookkeeping, split out of
// ControlPlane): sequence numbers, staged writes, messages held until their commit is durable
// and released in order, a failed commit's writes staged again, and the retry backoff on the
// monotonic clock.

#include "server/commit_pipeline.h"

#include <gtest/gtest.h>

#include "server/testing/fake_agent_channel.h"

namespace gpusched::server {
namespace {

using Kind = CommitPipeline::Outbound::Kind;

core::Action Assign(uint64_t task, const std::string& node, int64_t attempt = 1) {
  core::Action a;
  a.kind = core::Action::Kind::kAssign;
  a.task = TaskId(task);
  a.node = node;
  a.attempt = attempt;
  return a;
}

core::Action Kill(uint64_t task, const std::string& node) {
  core::Action a = Assign(task, node);
  a.kind = core::Action::Kind::kKill;
  return a;
}

std::vector<uint64_t> Tasks(const std::vector<CommitPipeline::Outbound>& out) {
  std::vector<uint64_t> ids;
  for (const CommitPipeline::Outbound& o : out) {
    ids.push_back(o.kind == Kind::kAck ? o.task : o.action.task.value());
  }
  return ids;
}

class CommitPipelineTest : public ::testing::Test {
 protected:
  FakeClock clock_{1'000'000};
  CommitPipeline pipeline_{clock_, 1'000};
};

TEST_F(CommitPipelineTest, Issue40_HeldMessagesLeaveOnlyOnceTheirCommitIsDurableInOrder) {
  auto channel = std::make_shared<testing::FakeAgentChannel>();
  pipeline_.pending().tasks.insert(TaskId(1));
  pipeline_.HoldAction(Assign(1, "n1"));
  pipeline_.HoldAck(channel, 7, 2);
  EXPECT_TRUE(pipeline_.AssignHeld(1, 1, "n1"));
  EXPECT_FALSE(pipeline_.AssignHeld(1, 2, "n1"));
  EXPECT_TRUE(pipeline_.TakeReleasable().empty());  // commit 1 has not even started
  CommitPipeline::Started first = pipeline_.Begin();
  EXPECT_EQ(first.seq, 1u);
  EXPECT_EQ(first.write.tasks, std::set<TaskId>{TaskId(1)});
  EXPECT_TRUE(pipeline_.committing());
  EXPECT_TRUE(pipeline_.Unstored(TaskId(1)));  // in the commit being written
  // Decided while commit 1 is written: rides in commit 2.
  pipeline_.HoldAction(Kill(3, "n2"));
  EXPECT_EQ(pipeline_.next_commit(), 2u);
  EXPECT_TRUE(pipeline_.TakeReleasable().empty());
  pipeline_.Committed(first.seq);
  EXPECT_TRUE(pipeline_.IsDurable(1));
  EXPECT_FALSE(pipeline_.Unstored(TaskId(1)));
  std::vector<CommitPipeline::Outbound> out = pipeline_.TakeReleasable();
  EXPECT_EQ(Tasks(out), (std::vector<uint64_t>{1, 7}));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].kind, Kind::kAck);
  EXPECT_EQ(out[1].channel.lock(), channel);
  EXPECT_FALSE(pipeline_.AssignHeld(1, 1, "n1"));  // sent
  EXPECT_TRUE(pipeline_.HasWork());  // the kill waits for commit 2, which nobody led yet
  EXPECT_TRUE(pipeline_.ShouldLead());
  CommitPipeline::Started second = pipeline_.Begin();
  EXPECT_TRUE(second.write.empty());
  EXPECT_FALSE(pipeline_.ShouldLead());  // one commit at a time
  pipeline_.Committed(second.seq);
  EXPECT_EQ(Tasks(pipeline_.TakeReleasable()), std::vector<uint64_t>{3});
  EXPECT_FALSE(pipeline_.HasWork());
}

TEST_F(CommitPipelineTest, Issue40_AFailedCommitKeepsItsMessagesAndStagesItsWritesAgain) {
  pipeline_.pending().tasks.insert(TaskId(1));
  pipeline_.pending().nodes["a"].spec.name = "a";
  pipeline_.pending().removed_nodes.insert("gone");
  pipeline_.pending().keys["k"] = 1;
  pipeline_.HoldAction(Assign(1, "n1"));
  CommitPipeline::Started c = pipeline_.Begin();
  // Staged while it was written: newer than what the failed commit carried.
  pipeline_.pending().nodes["a"].cordoned = true;
  pipeline_.pending().nodes["gone"].spec.name = "gone";  // registered again
  pipeline_.pending().tasks.insert(TaskId(2));
  c.write.keys.erase("k");  // the control plane took out a withdrawn submission's key
  pipeline_.Failed(c.seq, Unavailable("disk full"), std::move(c.write));
  EXPECT_FALSE(pipeline_.committing());
  EXPECT_FALSE(pipeline_.IsDurable(1));
  ASSERT_TRUE(pipeline_.FailureOf(1).has_value());
  EXPECT_EQ(pipeline_.FailureOf(1)->message(), "disk full");
  EXPECT_FALSE(pipeline_.FailureOf(2).has_value());  // the next commit has not failed
  EXPECT_TRUE(pipeline_.TakeReleasable().empty());
  EXPECT_TRUE(pipeline_.AssignHeld(1, 1, "n1"));
  const CommitPipeline::PendingWrite& p = pipeline_.pending();
  EXPECT_EQ(p.tasks, (std::set<TaskId>{TaskId(1), TaskId(2)}));
  EXPECT_TRUE(p.nodes.at("a").cordoned);  // the newer record wins
  EXPECT_TRUE(p.removed_nodes.empty());   // not deleted: it registered again
  EXPECT_TRUE(p.keys.empty());
  EXPECT_TRUE(pipeline_.Unstored(TaskId(1)));
  // The retry (commit 2) carries commit 1's changes: its success releases their messages.
  clock_.AdvanceMs(CommitPipeline::kFirstRetryMs);
  CommitPipeline::Started retry = pipeline_.Begin();
  EXPECT_EQ(retry.seq, 2u);
  pipeline_.Committed(retry.seq);
  EXPECT_TRUE(pipeline_.IsDurable(1));
  EXPECT_FALSE(pipeline_.FailureOf(1).has_value());
  EXPECT_EQ(Tasks(pipeline_.TakeReleasable()), std::vector<uint64_t>{1});
}

// Issue 43: a flush that demotes more tasks than one commit writes. The assignment decided
// after it leaves with the first commit, which writes kDemotionsPerCommit of the demotions;
// the rest follow in later commits, each bounded; a failed commit stages its demotions again,
// except one that changed in more than its Pt meanwhile (that one waits as a task record).
TEST_F(CommitPipelineTest, Issue43_DemotionsAreWrittenInBoundedCommitsThatNoMessageWaitsFor) {
  const size_t n = 2 * CommitPipeline::kDemotionsPerCommit + 10;
  for (size_t i = 1; i <= n; ++i) pipeline_.pending().demotions.insert(TaskId(100 + i));
  pipeline_.pending().tasks.insert(TaskId(1));
  pipeline_.HoldAction(Assign(1, "n1"));
  CommitPipeline::Started first = pipeline_.Begin();
  EXPECT_TRUE(first.complete) << "demotions left behind held the commit's messages";
  EXPECT_EQ(first.write.tasks, std::set<TaskId>{TaskId(1)});
  ASSERT_EQ(first.write.demotions.size(), CommitPipeline::kDemotionsPerCommit);
  EXPECT_EQ(*first.write.demotions.begin(), TaskId(101));  // in id order
  pipeline_.Committed(first.seq);
  EXPECT_EQ(Tasks(pipeline_.TakeReleasable()), std::vector<uint64_t>{1});
  EXPECT_TRUE(pipeline_.HasWork()) << "demotions are left to write";
  CommitPipeline::Started second = pipeline_.Begin();
  EXPECT_EQ(second.write.demotions.size(), CommitPipeline::kDemotionsPerCommit);
  EXPECT_EQ(*second.write.demotions.begin(), TaskId(101 + CommitPipeline::kDemotionsPerCommit));
  pipeline_.pending().tasks.insert(*second.write.demotions.begin());  // a real change since
  pipeline_.Failed(second.seq, Unavailable("disk full"), std::move(second.write));
  EXPECT_EQ(pipeline_.pending().demotions.size(), n - CommitPipeline::kDemotionsPerCommit - 1);
  EXPECT_EQ(pipeline_.pending().demotions.count(TaskId(101 + CommitPipeline::kDemotionsPerCommit)),
            0u);
  clock_.AdvanceMs(CommitPipeline::kFirstRetryMs);
  size_t written = 0;
  for (int commits = 0; pipeline_.HasWork(); ++commits) {
    ASSERT_LT(commits, 4) << "the demotions never drained";
    CommitPipeline::Started c = pipeline_.Begin();
    EXPECT_LE(c.write.demotions.size(), CommitPipeline::kDemotionsPerCommit);
    written += c.write.demotions.size() + c.write.tasks.size();
    pipeline_.Committed(c.seq);
  }
  EXPECT_EQ(written, n - CommitPipeline::kDemotionsPerCommit);
}

TEST_F(CommitPipelineTest, Issue40_TheBackoffGrowsWithEachFailureUpToItsMaxAndResetsOnSuccess) {
  const auto fail = [&] {
    pipeline_.pending().tasks.insert(TaskId(1));
    CommitPipeline::Started c = pipeline_.Begin();
    return pipeline_.Failed(c.seq, Unavailable("down"), std::move(c.write));
  };
  EXPECT_EQ(fail(), 50);
  EXPECT_EQ(pipeline_.consecutive_failures(), 1);
  EXPECT_FALSE(pipeline_.ShouldLead());  // within the backoff
  clock_.AdvanceMs(49);
  EXPECT_FALSE(pipeline_.ShouldLead());
  clock_.AdvanceMs(1);
  EXPECT_TRUE(pipeline_.ShouldLead());
  clock_.StepWallMs(-10'000'000);  // the wall clock steps back: the backoff is monotonic
  EXPECT_TRUE(pipeline_.ShouldLead());
  EXPECT_EQ(fail(), 100);
  EXPECT_EQ(fail(), 200);
  EXPECT_EQ(fail(), 400);
  EXPECT_EQ(fail(), 800);
  EXPECT_EQ(fail(), 1'000);  // retry_max_ms
  for (int i = 0; i < 30; ++i) EXPECT_EQ(fail(), 1'000);  // no overflow of the shift
  clock_.AdvanceMs(1'000);
  CommitPipeline::Started ok = pipeline_.Begin();
  pipeline_.Committed(ok.seq);
  EXPECT_EQ(pipeline_.consecutive_failures(), 0);
  EXPECT_EQ(fail(), 50);
}

TEST_F(CommitPipelineTest, Issue40_NothingToCommitLeadsNoCommitAndWithdrawnIsAnsweredOnce) {
  EXPECT_FALSE(pipeline_.HasWork());
  EXPECT_FALSE(pipeline_.ShouldLead());
  pipeline_.pending().peaks.insert(core::MemoryProfile{"classify", "resnet50", 1, 0, 0});
  EXPECT_TRUE(pipeline_.ShouldLead());
  pipeline_.Withdrawn(TaskId(4), NotStored("disk full"));
  ASSERT_TRUE(pipeline_.TakeWithdrawn(TaskId(4)).has_value());
  EXPECT_FALSE(pipeline_.TakeWithdrawn(TaskId(4)).has_value());
  EXPECT_FALSE(pipeline_.TakeWithdrawn(TaskId(5)).has_value());
}

}  // namespace
}  // namespace gpusched::server

namespace gpusched::server {
namespace {

// Issue 38: each staged task costs one operation; commits carry at most `ops`.
CommitPipeline::Budget OpsBudget(size_t ops) {
  CommitPipeline::Budget b;
  b.limits.max_ops = ops;
  b.task = [](TaskId) {
    store::CommitCost c;
    c.ops = 1;
    return c;
  };
  return b;
}

TEST(CommitPipelineBudgetTest, Issue38_BeginTakesWhatFitsAndNeverSplitsASubmission) {
  FakeClock clock{1'000'000};
  CommitPipeline p{clock, 1'000};
  p.pending().tasks = {TaskId(1), TaskId(2)};  // state changes
  for (uint64_t id = 10; id < 16; ++id) p.pending().tasks.insert(TaskId(id));
  p.pending().submissions[TaskId(10)] = 3;  // 10-12 with its key
  p.pending().submissions[TaskId(13)] = 3;  // 13-15
  p.pending().keys["k"] = 10;
  p.HoldAction(Assign(2, "n1"));
  // 2 changes + 3 tasks and a key = 6 operations; the second submission waits.
  CommitPipeline::Started c1 = p.Begin(OpsBudget(7));
  EXPECT_EQ(c1.write.tasks, (std::set<TaskId>{TaskId(1), TaskId(2), TaskId(10), TaskId(11),
                                              TaskId(12)}));
  EXPECT_EQ(c1.write.keys.count("k"), 1u);
  EXPECT_EQ(c1.write.submissions.size(), 1u);
  EXPECT_FALSE(c1.complete);
  EXPECT_TRUE(p.Unstored(TaskId(13)));
  p.Committed(c1.seq);
  // Commit 1 left part of what was staged for it: not durable for its waiters yet.
  EXPECT_FALSE(p.IsDurable(c1.seq));
  EXPECT_TRUE(p.TakeReleasable().empty());
  CommitPipeline::Started c2 = p.Begin(OpsBudget(7));
  EXPECT_EQ(c2.write.tasks, (std::set<TaskId>{TaskId(13), TaskId(14), TaskId(15)}));
  EXPECT_TRUE(c2.complete);
  p.Committed(c2.seq);
  EXPECT_TRUE(p.IsDurable(c1.seq));
  EXPECT_EQ(Tasks(p.TakeReleasable()), std::vector<uint64_t>{2});
}

TEST(CommitPipelineBudgetTest, Issue38_ASubmissionLargerThanTheBudgetStillGoesAloneAndWhole) {
  FakeClock clock{1'000'000};
  CommitPipeline p{clock, 1'000};
  for (uint64_t id = 1; id <= 5; ++id) p.pending().tasks.insert(TaskId(id));
  p.pending().submissions[TaskId(1)] = 5;
  CommitPipeline::Started c = p.Begin(OpsBudget(2));  // the store refuses it, whole
  EXPECT_EQ(c.write.tasks.size(), 5u);
  EXPECT_TRUE(c.complete);
  // A failed commit's submissions are staged again.
  p.Failed(c.seq, InvalidArgument("too large"), std::move(c.write));
  EXPECT_EQ(p.pending().submissions.size(), 1u);
  EXPECT_FALSE(p.IsDurable(c.seq));
}

}  // namespace
}  // namespace gpusched::server
