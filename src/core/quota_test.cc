// Team quotas with borrowing and reclaim (issues 11, 37), and fair share (issue 11). Values
// computed by hand.

#include "core/quota.h"

#include <gtest/gtest.h>

#include "core/fair_share.h"
#include "core/reclaim.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SchedulerTest;
using testing::WholeGpuTask;

constexpr DurationMs kHour = 3'600'000;

TaskSpec TeamTask(const std::string& team, int gpus, const std::string& user = "") {
  TaskSpec t = WholeGpuTask(gpus, team);
  t.team = team;
  t.user = user;
  return t;
}

TeamQuota Quota(const std::string& team, int64_t gpus, int64_t borrow) {
  TeamQuota q;
  q.team = team;
  q.guaranteed_gpus = gpus;
  q.borrow_gpus = borrow;
  return q;
}

class QuotaTest : public SchedulerTest {
 protected:
  void SetQuota(const TeamQuota& q) {
    Status s = sched_->SetQuota(q);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  bool Placed(TaskId id) { return T(id).placement.has_value(); }
};

TEST(TeamQuotaTest, BadValuesNameTheFieldAndValue) {
  TeamQuota q = Quota("", 1, 0);
  EXPECT_NE(q.Validate().message().find("team: must not be empty"), std::string::npos);
  q = Quota("a b", 1, 0);
  EXPECT_NE(q.Validate().message().find("team: \"a b\""), std::string::npos);
  q = Quota("a", -1, 0);
  EXPECT_NE(q.Validate().message().find("gpus: must be >= 0, got -1"), std::string::npos);
  q = Quota("a", 1, -5);
  EXPECT_NE(q.Validate().message().find("borrow: must be >= 0 (or unlimited), got -5"),
            std::string::npos);
  q = Quota("a", 1, 0);
  q.guaranteed_gpu_mem_mib = -3;
  EXPECT_NE(q.Validate().message().find("gpu_mem: must be >= 0, got -3 MiB"), std::string::npos);
  EXPECT_TRUE(Quota("a", 0, kUnlimitedBorrow).Validate().ok());
}

TEST(TeamQuotaTest, ParsesTheSimFlagAndNamesBadValues) {
  auto q = ParseTeamQuota("vc1=8:4");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(*q, Quota("vc1", 8, 4));
  EXPECT_EQ(*ParseTeamQuota("vc1=8"), Quota("vc1", 8, 0));
  EXPECT_EQ(*ParseTeamQuota("vc1=0:unlimited"), Quota("vc1", 0, kUnlimitedBorrow));
  EXPECT_EQ(ParseTeamQuota("vc1").status().message(), "--quota: \"vc1\" is not TEAM=GPUS[:BORROW]");
  EXPECT_EQ(ParseTeamQuota("vc1=x").status().message(),
            "--quota: \"vc1=x\": GPUS \"x\" is not a whole number");
  EXPECT_EQ(ParseTeamQuota("vc1=2:-1").status().message(),
            "--quota: \"vc1=2:-1\": BORROW \"-1\" is not a whole number or \"unlimited\"");
  EXPECT_EQ(ParseTeamQuota("vc1=2:").status().message(),
            "--quota: \"vc1=2:\": BORROW after ':' is empty");
  EXPECT_FALSE(ParseTeamQuota("=2").ok());
  EXPECT_FALSE(ParseTeamQuota("a b=2").ok());
}

TEST(TeamQuotaTest, EmptyTeamIsDefaultAndNoQuotaMeansUnlimitedBorrowing) {
  TaskSpec spec;
  EXPECT_EQ(TeamOf(spec), "default");
  QuotaPolicy p;
  EXPECT_EQ(p.Classify("x", TeamUsage{100, 0, 10}, 8), QuotaClass::kBorrowing);
  EXPECT_EQ(p.Classify("x", TeamUsage{}, 0), QuotaClass::kWithinGuarantee);  // CPU only
  ASSERT_TRUE(p.Set(Quota("a", 2, 1)).ok());
  EXPECT_EQ(p.Classify("a", TeamUsage{1, 0, 1}, 1), QuotaClass::kWithinGuarantee);
  EXPECT_EQ(p.Classify("a", TeamUsage{2, 0, 2}, 1), QuotaClass::kBorrowing);
  EXPECT_EQ(p.Classify("a", TeamUsage{2, 0, 2}, 2), QuotaClass::kOverLimit);
}

TEST(TeamQuotaTest, MemoryGuaranteeAlsoBoundsWithinGuarantee) {
  QuotaPolicy p;
  TeamQuota q = Quota("a", 4, 0);
  q.guaranteed_gpu_mem_mib = 20 * 1024;
  ASSERT_TRUE(p.Set(q).ok());
  EXPECT_EQ(p.Classify("a", TeamUsage{1, 16 * 1024, 1}, 1, 4 * 1024),
            QuotaClass::kWithinGuarantee);
  // 16 + 8 GiB > 20 GiB: beyond the memory guarantee, and borrow 0 does not cover GPUs 2 <= 4,
  // so it borrows memory only: classed as borrowing.
  EXPECT_EQ(p.Classify("a", TeamUsage{1, 16 * 1024, 1}, 1, 8 * 1024), QuotaClass::kBorrowing);
}

// Plain FIFO would place B's two tasks (submitted first) and leave A waiting.
TEST_F(QuotaTest, WithinGuaranteeIsPlacedBeforeBorrowers) {
  AddNode(MakeNode("n1", 4, 80 * testing::kGiB));
  SetQuota(Quota("a", 2, 0));
  SetQuota(Quota("b", 0, 4));
  const TaskId b1 = Submit(TeamTask("b", 2));
  const TaskId b2 = Submit(TeamTask("b", 2));
  const TaskId a1 = Submit(TeamTask("a", 2));
  EXPECT_EQ(sched_->MainQueueOrder(), (std::vector<TaskId>{b1, b2, a1}));
  sched_->Schedule();
  EXPECT_TRUE(Placed(a1));
  EXPECT_TRUE(Placed(b1));
  EXPECT_FALSE(Placed(b2));
  const auto teams = sched_->Teams();
  EXPECT_EQ(teams.at("a").used.gpus, 2);
  EXPECT_EQ(teams.at("a").borrowed_gpus, 0);
  EXPECT_EQ(teams.at("b").used.gpus, 2);
  EXPECT_EQ(teams.at("b").borrowed_gpus, 2);
  EXPECT_EQ(teams.at("b").pending, 1);
  ExpectInvariants();
}

TEST_F(QuotaTest, BorrowsIdleGpusUpToItsLimitAndNotBeyond) {
  AddNode(MakeNode("n1", 8, 80 * testing::kGiB));
  SetQuota(Quota("a", 4, 0));
  SetQuota(Quota("b", 1, 2));
  std::vector<TaskId> b;
  for (int i = 0; i < 5; ++i) b.push_back(Submit(TeamTask("b", 1)));
  sched_->Schedule();
  EXPECT_TRUE(Placed(b[0]) && Placed(b[1]) && Placed(b[2]));  // 1 guaranteed + 2 borrowed
  EXPECT_FALSE(Placed(b[3]));
  EXPECT_FALSE(Placed(b[4]));
  EXPECT_EQ(T(b[3]).reason, "team b is at its quota: 3 GPUs in use, guarantee 1 + borrow 2");
  EXPECT_EQ(T(b[3]).placement_failures, 0);  // a quota wait is not a placement failure
  EXPECT_EQ(sched_->cluster().summary(0).whole_free_gpus, 5);
  sched_->Schedule();
  EXPECT_FALSE(Placed(b[3]));
  ExpectInvariants();
}

TEST_F(QuotaTest, OwnerReclaimsFromTheBorrowersNewestTasks) {
  AddNode(MakeNode("n1", 4, 80 * testing::kGiB));
  SetQuota(Quota("a", 4, 0));
  SetQuota(Quota("b", 0, 4));
  std::vector<TaskId> b;
  for (int i = 0; i < 3; ++i) {  // assigned at t = 0, 1, 2 s
    b.push_back(Submit(TeamTask("b", 1)));
    sched_->Schedule();
    StartAssigned();
    AdvanceAlive(1000);
  }
  const TaskId a1 = Submit(TeamTask("a", 2));
  sched_->Schedule();
  // One GPU was free; the newest borrowed task (b[2]) gives up the second.
  EXPECT_TRUE(Placed(a1));
  EXPECT_TRUE(Placed(b[0]));
  EXPECT_TRUE(Placed(b[1]));
  const Task& v = T(b[2]);
  EXPECT_EQ(v.state, TaskState::kPending);
  EXPECT_EQ(v.queue, QueueMembership::kMain);
  EXPECT_EQ(v.fail_cnt, 0);
  EXPECT_EQ(v.preemptions, 1);
  EXPECT_EQ(v.reason, "preempted: team a reclaims its guaranteed GPUs");
  int kills = 0;
  for (const Action& a : sched_->TakeActions()) {
    if (a.kind != Action::Kind::kKill) continue;
    ++kills;
    EXPECT_EQ(a.task, b[2]);
    EXPECT_EQ(a.attempt, 1);
    EXPECT_EQ(a.reason, "preempted: team a reclaims its guaranteed GPUs");
  }
  EXPECT_EQ(kills, 1);
  EXPECT_EQ(sched_->stats().reclaims, 1);
  ExpectInvariants();
  // The requeued task comes back when the owner leaves.
  ASSERT_TRUE(sched_->TaskStarted(a1, 1).ok());
  ASSERT_TRUE(sched_->TaskFinished(a1, 1, 0, 0).ok());
  sched_->Schedule();
  EXPECT_TRUE(Placed(b[2]));
  EXPECT_EQ(T(b[2]).attempts, 2);
  EXPECT_EQ(T(b[2]).fail_cnt, 0);
}

TEST_F(QuotaTest, ReclaimTiesGoToTheLargestIdAndOnlyBorrowersAreVictims) {
  AddNode(MakeNode("n1", 4, 80 * testing::kGiB));
  SetQuota(Quota("a", 2, 0));
  SetQuota(Quota("b", 1, 4));
  std::vector<TaskId> b;
  for (int i = 0; i < 4; ++i) b.push_back(Submit(TeamTask("b", 1)));  // all assigned at t = 0
  sched_->Schedule();
  StartAssigned();
  const TaskId a1 = Submit(TeamTask("a", 2));
  sched_->Schedule();
  EXPECT_TRUE(Placed(a1));
  EXPECT_TRUE(Placed(b[0]) && Placed(b[1]));
  EXPECT_FALSE(Placed(b[2]));
  EXPECT_FALSE(Placed(b[3]));
  // Now b holds 2 (guarantee 1): a task of a third team within its guarantee 1 can take b's
  // borrowed GPU but never b's guaranteed one.
  SetQuota(Quota("c", 2, 0));
  const TaskId c1 = Submit(TeamTask("c", 2));
  sched_->Schedule();
  EXPECT_FALSE(Placed(c1));  // freeing b[1] alone leaves 1 GPU: no victims taken
  EXPECT_TRUE(Placed(b[0]) && Placed(b[1]));
  ExpectInvariants();
}

TEST_F(QuotaTest, WithoutQuotasTheOrderIsTodays) {
  AddNode(MakeNode("n1", 4, 80 * testing::kGiB));
  const TaskId b1 = Submit(TeamTask("b", 2));
  const TaskId b2 = Submit(TeamTask("b", 2));
  const TaskId a1 = Submit(TeamTask("a", 2));
  sched_->Schedule();
  EXPECT_TRUE(Placed(b1) && Placed(b2));
  EXPECT_FALSE(Placed(a1));
}

// ---------------------------------------------------------------- reclaim (issue 37)
// Each test fails on the reclaim of issue 11 (newest borrowed tasks first, anywhere, while
// their team borrows): core/reclaim.h.

class ReclaimTest : public QuotaTest {
 protected:
  // Submits, places and starts one task; REQUIRES: it fits now.
  TaskId Run(const TaskSpec& spec) {
    const TaskId id = Submit(spec);
    sched_->Schedule();
    StartAssigned();
    EXPECT_TRUE(T(id).placement.has_value()) << T(id).reason;
    AdvanceAlive(1000);  // each a second younger than the last
    return id;
  }
  std::string NodeOf(TaskId id) { return T(id).placement ? T(id).placement->node : ""; }
  // The tasks the last pass stopped, in order.
  std::vector<TaskId> Killed() {
    std::vector<TaskId> out;
    for (const Action& a : sched_->TakeActions()) {
      if (a.kind == Action::Kind::kKill) out.push_back(a.task);
    }
    return out;
  }
};

TaskSpec Tolerating(TaskSpec t) {
  Toleration tol;
  tol.key = "dedicated";
  tol.value = "nlp";
  t.tolerations.push_back(tol);
  return t;
}

TaskSpec On(TaskSpec t, const std::string& node) {
  t.node_selector["host"] = node;
  return t;
}

NodeSpec Labelled(const std::string& name, int gpus) {
  NodeSpec n = MakeNode(name, gpus, 80 * kGiB);
  n.labels["host"] = name;
  return n;
}

// A victim on a node the claimant cannot use (a taint it does not tolerate) frees nothing for
// it: only a task on the node it can run on is stopped, and only one.
TEST_F(ReclaimTest, Issue37_VictimsOnlyOnNodesTheClaimantCanUse) {
  AddNode(MakeNode("plain", 2, 80 * kGiB));
  SetQuota(Quota("vision", 1, 0));
  const TaskId old1 = Run(Tolerating(TeamTask("nlp", 1)));
  const TaskId old2 = Run(Tolerating(TeamTask("nlp", 1)));
  NodeSpec tainted = MakeNode("tainted", 2, 80 * kGiB);
  tainted.taints.push_back({"dedicated", "nlp", TaintEffect::kNoSchedule});
  AddNode(tainted);
  const TaskId new1 = Run(Tolerating(TeamTask("nlp", 1)));
  const TaskId new2 = Run(Tolerating(TeamTask("nlp", 1)));
  ASSERT_EQ(NodeOf(old1), "plain");
  ASSERT_EQ(NodeOf(new2), "tainted");
  sched_->TakeActions();

  const TaskId v = Submit(TeamTask("vision", 1));
  sched_->Schedule();
  EXPECT_EQ(Killed(), std::vector<TaskId>{old2});  // the later of the two it can use
  EXPECT_EQ(NodeOf(v), "plain");
  EXPECT_EQ(NodeOf(new1), "tainted");
  EXPECT_EQ(NodeOf(new2), "tainted");
  EXPECT_EQ(T(old2).state, TaskState::kPending);
  EXPECT_EQ(T(old2).fail_cnt, 0);
  EXPECT_EQ(sched_->stats().reclaims, 1);
  // The stopped task does not come back on the GPU it was stopped for.
  sched_->Schedule();
  EXPECT_FALSE(T(old2).placement.has_value());
  ExpectInvariants();
}

// Issue 37, point 4: a team with an unused guarantee of 2 waited forever while the borrower's
// newest tasks were spread over two nodes (one freed on each, then the borrower no longer
// borrowed). The set is chosen on one node.
TEST_F(ReclaimTest, Issue37_AGuaranteeIsReclaimedOnOneNodeNotSpreadOverTwo) {
  AddNode(Labelled("n1", 2));
  AddNode(Labelled("n2", 2));
  SetQuota(Quota("vision", 2, 0));
  SetQuota(Quota("nlp", 2, 2));
  const TaskId t1 = Run(On(TeamTask("nlp", 1), "n1"));
  const TaskId t2 = Run(On(TeamTask("nlp", 1), "n2"));
  const TaskId t3 = Run(On(TeamTask("nlp", 1), "n1"));
  const TaskId t4 = Run(On(TeamTask("nlp", 1), "n2"));
  sched_->TakeActions();

  const TaskId v = Submit(TeamTask("vision", 2));
  sched_->Schedule();
  EXPECT_EQ(NodeOf(v), "n1") << T(v).reason;  // both nodes need 2: ties by node
  EXPECT_EQ(Killed(), (std::vector<TaskId>{t3, t1}));
  EXPECT_EQ(NodeOf(t2), "n2");
  EXPECT_EQ(NodeOf(t4), "n2");
  const auto teams = sched_->Teams();
  EXPECT_EQ(teams.at("vision").used.gpus, 2);
  EXPECT_EQ(teams.at("nlp").used.gpus, 2);  // at its guarantee, not below
  ExpectInvariants();
}

// Victims come from the team furthest above its guarantee, not from the newest task.
TEST_F(ReclaimTest, Issue37_VictimsFromTheTeamFurthestAboveItsGuarantee) {
  AddNode(MakeNode("n1", 4, 80 * kGiB));
  SetQuota(Quota("vision", 1, 0));
  SetQuota(Quota("nlp", 0, 4));
  SetQuota(Quota("audio", 0, 4));
  const TaskId n1 = Run(TeamTask("nlp", 1));
  const TaskId n2 = Run(TeamTask("nlp", 1));
  const TaskId n3 = Run(TeamTask("nlp", 1));
  const TaskId a1 = Run(TeamTask("audio", 1));  // the newest, of the team that borrows least
  sched_->TakeActions();
  const TaskId v = Submit(TeamTask("vision", 1));
  sched_->Schedule();
  EXPECT_EQ(Killed(), std::vector<TaskId>{n3});
  EXPECT_TRUE(T(v).placement.has_value());
  EXPECT_TRUE(T(a1).placement.has_value());
  EXPECT_TRUE(T(n1).placement && T(n2).placement);
  ExpectInvariants();
}

// The smallest set that lets the task start: one 4-GPU task rather than four 1-GPU tasks.
TEST_F(ReclaimTest, Issue37_TheSmallestSetOfVictimsWins) {
  AddNode(MakeNode("n1", 4, 80 * kGiB));
  AddNode(MakeNode("n2", 4, 80 * kGiB));
  SetQuota(Quota("vision", 4, 0));
  const TaskId big = Run(TeamTask("nlp", 4));
  std::vector<TaskId> small;
  for (int i = 0; i < 4; ++i) small.push_back(Run(TeamTask("nlp", 1)));  // the newest
  const std::string big_node = NodeOf(big);
  ASSERT_NE(big_node, NodeOf(small[0]));
  sched_->TakeActions();
  const TaskId v = Submit(TeamTask("vision", 4));
  sched_->Schedule();
  EXPECT_EQ(Killed(), std::vector<TaskId>{big});
  EXPECT_EQ(NodeOf(v), big_node);
  for (TaskId s : small) EXPECT_TRUE(T(s).placement.has_value());
  ExpectInvariants();
}

// `why` names the quota state and what is reclaimed; the stopped task gets the preemption
// grace, is requeued with no failure counted, and the claimant starts in the same pass.
TEST_F(ReclaimTest, Issue37_WhyNamesTheQuotaStateAndTheReclaim) {
  AddNode(MakeNode("n1", 4, 80 * kGiB));
  SetQuota(Quota("vision", 4, 0));
  SetQuota(Quota("nlp", 0, 4));
  const TaskId held = Run(TeamTask("vision", 2));
  const TaskId b1 = Run(TeamTask("nlp", 2));
  sched_->TakeActions();
  const TaskId v = Submit(TeamTask("vision", 2));
  sched_->Schedule();
  ASSERT_TRUE(T(v).placement.has_value());
  auto why = sched_->Explain(v);
  ASSERT_TRUE(why.ok());
  EXPECT_EQ(why->summary.rfind("team vision at 2/4 guaranteed GPUs; reclaiming 2 from nlp, "
                               "ready in 30s; ",
                               0),
            0u)
      << why->summary;
  bool killed = false;
  for (const Action& a : sched_->TakeActions()) {
    if (a.kind != Action::Kind::kKill) continue;
    killed = true;
    EXPECT_EQ(a.task, b1);
    EXPECT_EQ(a.grace_ms, 30'000);  // preemption_grace
  }
  EXPECT_TRUE(killed);
  EXPECT_EQ(T(b1).fail_cnt, 0);
  EXPECT_EQ(T(b1).state, TaskState::kPending);
  EXPECT_TRUE(T(held).placement.has_value());

  // Nothing left to reclaim (vision's own tasks, and nlp at its guarantee 0 of nothing).
  const TaskId w = Submit(TeamTask("vision", 2));
  SetQuota(Quota("vision", 6, 0));
  sched_->Schedule();
  EXPECT_FALSE(T(w).placement.has_value());
  why = sched_->Explain(w);
  ASSERT_TRUE(why.ok());
  EXPECT_NE(why->summary.find("team vision at 4/6 guaranteed GPUs, nothing to reclaim"),
            std::string::npos)
      << why->summary;
}

// The pure choice: nothing when no team is above its guarantee.
TEST(ChooseReclaimTest, Issue37_NoTeamAboveItsGuaranteeGivesNothing) {
  ClusterState view;
  ASSERT_TRUE(view.Upsert(MakeNode("n1", 1, 80 * kGiB), 0).ok());
  view.Update(0, [](NodeState& n) {
    n.reachable = true;
    n.available = true;
  });
  QuotaPolicy quotas;
  ASSERT_TRUE(quotas.Set(Quota("nlp", 1, 0)).ok());
  Placement p;
  p.node_index = 0;
  p.node = "n1";
  p.gpus = {0};
  p.gpu_mem_mib = {80 * kGiB};
  view.Reserve(p);
  PlacementRequest r;
  r.gpus = 1;
  r.exclusive = true;
  const std::vector<ReclaimCandidate> c = {{TaskId(1), "nlp", p}};
  EXPECT_FALSE(ChooseReclaim(view, r, quotas, {{"nlp", TeamUsage{1, 80 * kGiB, 1}}}, c));
  ASSERT_TRUE(quotas.Set(Quota("nlp", 0, 1)).ok());
  auto choice = ChooseReclaim(view, r, quotas, {{"nlp", TeamUsage{1, 80 * kGiB, 1}}}, c);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->victims, std::vector<size_t>{0});
  EXPECT_EQ(DescribeReclaim(*choice, 1500), "reclaiming 1 from nlp, ready in 1s");
}

// ---------------------------------------------------------------- fair share

TEST(FairShareTest, FactorValues) {
  EXPECT_DOUBLE_EQ(FairShareFactor(0, 0.5), 1.0);
  EXPECT_DOUBLE_EQ(FairShareFactor(0.5, 0.5), 0.5);
  EXPECT_DOUBLE_EQ(FairShareFactor(1.0, 0.25), 0.0625);  // 2^-4
  EXPECT_DOUBLE_EQ(FairShareFactor(0.3, 0), 0.0);
}

TEST(FairShareTest, UsageDecaysByTheHalfLife) {
  FairShareUsage u(kHour);
  u.Charge("a", "ann", 3'600'000, 0);  // 1 GPU for 1 h
  EXPECT_DOUBLE_EQ(u.Team("a", 0), 3'600'000);
  EXPECT_DOUBLE_EQ(u.Team("a", kHour), 1'800'000);
  EXPECT_DOUBLE_EQ(u.Team("a", 2 * kHour), 900'000);
  u.Charge("a", "bob", 900'000, 2 * kHour);
  EXPECT_DOUBLE_EQ(u.Team("a", 2 * kHour), 1'800'000);
  EXPECT_DOUBLE_EQ(u.User("a", "ann", 3 * kHour), 450'000);
  EXPECT_DOUBLE_EQ(u.User("a", "bob", 3 * kHour), 450'000);
  EXPECT_DOUBLE_EQ(u.Total(3 * kHour), 900'000);
  FairShareUsage none(0);  // half-life 0: no decay
  none.Charge("a", "", 10, 0);
  EXPECT_DOUBLE_EQ(none.Team("a", 100 * kHour), 10);
}

TEST(FairShareTest, RankKeepsPtOrderForOneFactor) {
  FairShareOptions o;
  // P = 1000 * (8 - Pt) / 7 + 1000 * F; rank = -round(1000 P)
  EXPECT_EQ(FairShareRank(o, 1, 8, 0.5), -1'500'000);
  EXPECT_EQ(FairShareRank(o, 8, 8, 0.5), -500'000);
  EXPECT_LT(FairShareRank(o, 3, 8, 0.25), FairShareRank(o, 4, 8, 0.25));
}

class FairShareSchedulerTest : public QuotaTest {
 protected:
  void SetUp() override {
    SchedulerConfig c;
    c.fair_share.half_life_ms = kHour;
    c.fair_share.recalc_ms = 1000;
    c.capacity_wait = CapacityWait::kStayQueued;  // waiting tasks stay in Q, to read its order
    Init(c);
  }
  // Runs one task of (team, user) on the cluster's only GPU for `ms`.
  void Use(const std::string& team, const std::string& user, DurationMs ms) {
    const TaskId id = Submit(TeamTask(team, 1, user));
    sched_->Schedule();
    StartAssigned();
    ASSERT_TRUE(Placed(id));
    AdvanceAlive(ms);
    ASSERT_TRUE(sched_->TaskFinished(id, 1, 0, 0).ok());
  }
};

TEST_F(FairShareSchedulerTest, TheTeamWithMoreDecayedUsageGoesAfter) {
  AddNode(MakeNode("n1", 1, 80 * testing::kGiB));
  Use("a", "ann", 3 * kHour);
  Use("b", "bob", kHour);
  // Decayed at 4 h: a charged 3 GPU-h at 3 h -> 1.5; b 1 GPU-h at 4 h -> 1; total 2.5.
  EXPECT_DOUBLE_EQ(sched_->fair_share_usage().Team("a", clock_.NowMs()), 1.5 * kHour);
  EXPECT_DOUBLE_EQ(sched_->fair_share_usage().Total(clock_.NowMs()), 2.5 * kHour);
  // Shares 1:1 (no quota), S = 0.5. F(a) = 2^(-0.6/0.5) = 0.43528, one user with all of a's
  // usage: 2^(-1/1) = 0.5, so 0.21764. F(b) = 2^(-0.4/0.5) = 0.57435, times 0.5 = 0.28717.
  EXPECT_NEAR(sched_->FairShareOf("a", "ann"), 0.217638, 1e-6);
  EXPECT_NEAR(sched_->FairShareOf("b", "bob"), 0.287175, 1e-6);
  // a submits first; FIFO (and Pt: equal) would serve a first.
  const TaskId blocker = Submit(TeamTask("c", 1, "cy"));
  sched_->Schedule();
  StartAssigned();
  const TaskId a = Submit(TeamTask("a", 1, "ann"));
  const TaskId bt = Submit(TeamTask("b", 1, "bob"));
  AdvanceAlive(1000);
  sched_->Schedule();
  EXPECT_EQ(sched_->MainQueueOrder(), (std::vector<TaskId>{bt, a}));
  ASSERT_TRUE(sched_->TaskFinished(blocker, 1, 0, 0).ok());
  sched_->Schedule();
  EXPECT_TRUE(Placed(bt));
  EXPECT_FALSE(Placed(a));
  ExpectInvariants();
}

TEST_F(FairShareSchedulerTest, UsersInsideOneTeamAreOrderedByTheirUsage) {
  AddNode(MakeNode("n1", 1, 80 * testing::kGiB));
  Use("a", "ann", 2 * kHour);
  const TaskId blocker = Submit(TeamTask("a", 1, "cy"));
  sched_->Schedule();
  StartAssigned();
  const TaskId ann = Submit(TeamTask("a", 1, "ann"));
  const TaskId bob = Submit(TeamTask("a", 1, "bob"));
  AdvanceAlive(1000);
  sched_->Schedule();
  EXPECT_EQ(sched_->MainQueueOrder(), (std::vector<TaskId>{bob, ann}));
  (void)blocker;
}

TEST_F(FairShareSchedulerTest, OneTeamOneUserKeepsThePtOrder) {
  AddNode(MakeNode("n1", 1, 80 * testing::kGiB));
  Use("", "", kHour);
  const TaskId blocker = Submit(TeamTask("", 1));
  sched_->Schedule();
  StartAssigned();
  std::vector<TaskId> ids;
  for (int cpu : {4'000, 16'000, 1'000, 4'000}) {  // Pt 3, 3, 4, 3
    TaskSpec t = TeamTask("", 1);
    t.resources.cpu_milli = cpu;
    ids.push_back(Submit(t));
  }
  AdvanceAlive(2000);
  sched_->Schedule();
  std::vector<TaskId> by_pt = ids;
  std::stable_sort(by_pt.begin(), by_pt.end(),
                   [&](TaskId x, TaskId y) { return T(x).pt < T(y).pt; });
  EXPECT_EQ(sched_->MainQueueOrder(), by_pt);
  (void)blocker;
}

}  // namespace
}  // namespace gpusched::core
