// TeamLedger on its own (issue 40): quotas, usage per team, `quota ls`'s rows and priority
// grants, without a scheduler.

#include "core/team_ledger.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace gpusched::core {
namespace {

Placement On(int gpus, MiB mib_each) {
  Placement p;
  p.node = "n";
  for (int i = 0; i < gpus; ++i) {
    p.gpus.push_back(i);
    p.gpu_mem_mib.push_back(mib_each);
  }
  return p;
}

TeamQuota Quota(const std::string& team, int64_t gpus, const std::string& max_priority = "") {
  TeamQuota q;
  q.team = team;
  q.guaranteed_gpus = gpus;
  q.max_priority = max_priority;
  return q;
}

class TeamLedgerTest : public ::testing::Test {
 protected:
  SchedulerConfig config_;
  TeamLedger ledger_{config_};
};

TEST_F(TeamLedgerTest, Issue40_CountsGpusMemoryAndTasksOfEveryRank) {
  const Placement head = On(2, 1000);
  const std::vector<Placement> gang = {On(2, 1000), On(2, 1000)};
  ledger_.CountUsage("a", head, gang, +1);
  ledger_.CountUsage("a", On(1, 500), {}, +1);
  EXPECT_EQ(ledger_.usage().at("a").gpus, 7);
  EXPECT_EQ(ledger_.usage().at("a").gpu_mem_mib, 6500);
  EXPECT_EQ(ledger_.usage().at("a").tasks, 2);
  ledger_.CountUsage("a", head, gang, -1);
  EXPECT_EQ(ledger_.usage().at("a").gpus, 1);
  EXPECT_EQ(ledger_.usage().at("a").gpu_mem_mib, 500);
  EXPECT_EQ(ledger_.usage().at("a").tasks, 1);
  ledger_.Touch("b");  // looked up by a pass: listed, idle
  EXPECT_EQ(ledger_.usage().at("b").tasks, 0);
}

TEST_F(TeamLedgerTest, Issue40_TeamsListsQuotasHoldersAndPendingWithBorrowing) {
  ASSERT_TRUE(ledger_.SetQuota(Quota("a", 2)).ok());
  ledger_.CountUsage("a", On(3, 100), {}, +1);  // one GPU above its guarantee
  ledger_.CountUsage("b", On(1, 100), {}, +1);  // no quota: all borrowed
  ledger_.Touch("idle");                         // no task held: not listed
  const std::map<std::string, TeamStatus> teams = ledger_.Teams({{"c", 4}});
  ASSERT_EQ(teams.size(), 3u);
  EXPECT_TRUE(teams.at("a").has_quota);
  EXPECT_EQ(teams.at("a").used.gpus, 3);
  EXPECT_EQ(teams.at("a").borrowed_gpus, 1);
  EXPECT_FALSE(teams.at("b").has_quota);
  EXPECT_EQ(teams.at("b").borrowed_gpus, 1);
  EXPECT_EQ(teams.at("c").pending, 4);
  EXPECT_EQ(teams.at("c").used.tasks, 0);
  ledger_.RemoveQuota("a");
  EXPECT_FALSE(ledger_.Teams({}).at("a").has_quota);
  EXPECT_EQ(ledger_.Teams({}).at("a").borrowed_gpus, 3);
}

TEST_F(TeamLedgerTest, Issue40_AQuotaOfAnUnknownClassIsRefusedNamingTheKnownOnes) {
  const Status s = ledger_.SetQuota(Quota("a", 1, "urgent"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("\"urgent\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("high, normal, low"), std::string::npos) << s.message();
  EXPECT_TRUE(ledger_.quotas().quotas().empty());  // nothing changed
  EXPECT_FALSE(ledger_.SetQuota(Quota("a", -1)).ok());  // QuotaPolicy's own checks
}

TEST_F(TeamLedgerTest, Issue40_GrantsComeFromTheQuotaThenTheTeamThenTheDefault) {
  config_.priority_grants.enforce = true;
  config_.priority_grants.default_max = "low";
  config_.priority_grants.teams["b"] = "normal";
  ASSERT_TRUE(ledger_.SetQuota(Quota("a", 0, "high")).ok());
  EXPECT_EQ(ledger_.GrantedClass("a"), "high");
  EXPECT_EQ(ledger_.GrantedClass("b"), "normal");
  EXPECT_EQ(ledger_.GrantedClass("c"), "low");
  EXPECT_EQ(ledger_.GrantedClass(""), "low");  // team "default"
  TaskSpec spec;
  spec.team = "b";
  spec.priority_class = "high";
  const Status refused = ledger_.CheckPriorityGrant(spec);
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("team b may use up to normal"), std::string::npos)
      << refused.message();
  spec.priority_class = "normal";
  EXPECT_TRUE(ledger_.CheckPriorityGrant(spec).ok());
  // Preempting with a priority above the grant: capped at the grant now.
  EXPECT_EQ(ledger_.PreemptingPriority(1000, "b"), 0);
  EXPECT_EQ(ledger_.PreemptingPriority(-1000, "b"), -1000);
  EXPECT_EQ(ledger_.PreemptingPriority(1000, "a"), 1000);
  config_.priority_grants.enforce = false;  // not enforced: own class, no refusal
  spec.priority_class = "high";
  EXPECT_TRUE(ledger_.CheckPriorityGrant(spec).ok());
  EXPECT_EQ(ledger_.PreemptingPriority(1000, "b"), 1000);
}

}  // namespace
}  // namespace gpusched::core
