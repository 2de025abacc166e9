#include "server/accounting.h"

#include <gtest/gtest.h>

namespace gpusched::server {
namespace {

constexpr int64_t kHour = 3'600'000;

v1::Task RanTask(uint64_t id, int gpu, int64_t mib, std::vector<std::pair<int64_t, std::string>> h,
                 int64_t finished_ms = 0) {
  v1::Task t;
  t.set_id(id);
  t.set_node("n1");
  t.add_gpus(gpu);
  t.add_gpu_mem_mib(mib);
  t.set_finished_ms(finished_ms);
  for (const auto& [at, state] : h) {
    auto* x = t.add_history();
    x->set_at_ms(at);
    x->set_state(state);
  }
  return t;
}

AccountingQuery Window(int64_t since, int64_t until, int64_t step, int64_t now) {
  AccountingQuery q;
  q.since_ms = since;
  q.until_ms = until;
  q.step_ms = step;
  q.now_ms = now;
  return q;
}

TEST(AccountingTest, SharedGpusCountTheirShareAndIntervalsAreCut) {
  Accounting a(Window(0, 4 * kHour, kHour, 4 * kHour), {{{"n1", 0}, 16384}, {{"n1", 1}, 16384}});
  // Whole GPU 1, running from 0.5 h to 2.5 h.
  a.Add(RanTask(1, 1, 16384, {{0, "pending"}, {kHour / 2, "running"},
                              {5 * kHour / 2, "succeeded"}}, 5 * kHour / 2));
  // A quarter of GPU 0, running twice: 1 h..2 h, failed, again from 3 h, still running at 4 h.
  a.Add(RanTask(2, 0, 4096, {{0, "pending"}, {kHour, "running"}, {2 * kHour, "pending"},
                             {3 * kHour, "assigned"}, {3 * kHour, "running"}}));
  // Never ran: not counted.
  v1::Task pending;
  pending.set_id(3);
  a.Add(pending);
  auto groups = a.Groups();
  ASSERT_EQ(groups.size(), 1u);
  const AccountingGroup& g = groups[0];
  EXPECT_EQ(g.name, "default");
  EXPECT_EQ(g.tasks, 2);
  EXPECT_DOUBLE_EQ(g.gpu_hours, 2.0 + 0.25 * 2);
  EXPECT_DOUBLE_EQ(g.gpu_mem_gib_hours, 16.0 * 2 + 4.0 * 2);
  ASSERT_EQ(g.gpu_hours_by_step.size(), 4u);
  EXPECT_DOUBLE_EQ(g.gpu_hours_by_step[0], 0.5);
  EXPECT_DOUBLE_EQ(g.gpu_hours_by_step[1], 1.25);
  EXPECT_DOUBLE_EQ(g.gpu_hours_by_step[2], 0.5);
  EXPECT_DOUBLE_EQ(g.gpu_hours_by_step[3], 0.25);
}

TEST(AccountingTest, WindowAndFilters) {
  auto task = RanTask(1, 0, 8192, {{0, "running"}, {2 * kHour, "failed"}}, 2 * kHour);
  Accounting late(Window(kHour, 3 * kHour, kHour / 2, 3 * kHour), {{{"n1", 0}, 16384}});
  late.Add(task);
  ASSERT_EQ(late.Groups().size(), 1u);
  EXPECT_DOUBLE_EQ(late.Groups()[0].gpu_hours, 0.5);  // half a GPU for the hour inside
  EXPECT_EQ(late.steps(), 4u);
  Accounting after(Window(2 * kHour, 3 * kHour, kHour, 3 * kHour), {});
  after.Add(task);
  EXPECT_TRUE(after.Groups().empty());
  AccountingQuery other = Window(0, 3 * kHour, kHour, 3 * kHour);
  other.team = "research";
  Accounting filtered(other, {});
  filtered.Add(task);
  EXPECT_TRUE(filtered.Groups().empty());
  // A GPU of unknown size counts whole.
  Accounting unknown(Window(0, 2 * kHour, kHour, 2 * kHour), {});
  unknown.Add(task);
  EXPECT_DOUBLE_EQ(unknown.Groups()[0].gpu_hours, 2.0);
}

}  // namespace
}  // namespace gpusched::server

namespace gpusched::server {
namespace {

TEST(AccountingTest, OwnersAreTheTasksUserAndTeamEmptyIsDefault) {
  auto owned = [](uint64_t id, const std::string& user, const std::string& team, int gpu) {
    v1::Task t = RanTask(id, gpu, 16384, {{0, "running"}, {kHour, "succeeded"}}, kHour);
    t.mutable_spec()->set_user(user);
    t.mutable_spec()->set_team(team);
    return t;
  };
  AccountingQuery q = Window(0, 2 * kHour, 2 * kHour, 2 * kHour);
  q.by = AccountingQuery::By::kTeamUser;
  Accounting a(q, {{{"n1", 0}, 16384}, {{"n1", 1}, 16384}});
  a.Add(owned(1, "alice", "a", 0));
  a.Add(owned(2, "bob", "b", 1));
  a.Add(owned(3, "", "", 0));
  auto groups = a.Groups();
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].name, "a/alice");
  EXPECT_EQ(groups[0].team, "a");
  EXPECT_EQ(groups[0].user, "alice");
  EXPECT_DOUBLE_EQ(groups[0].gpu_hours, 1.0);
  EXPECT_DOUBLE_EQ(groups[0].gpu_mem_gib_hours, 16.0);
  EXPECT_EQ(groups[2].name, "default/default");
  EXPECT_EQ(OwnerOf(owned(4, "carol", "", 0)).team, "default");
  EXPECT_EQ(OwnerOf(owned(4, "carol", "", 0)).user, "carol");
}

}  // namespace
}  // namespace gpusched::server
