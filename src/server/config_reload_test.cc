// Issue 39: ConfigReloader sorts a reloaded config file's changed keys into applied (live)
// and needs_restart; a bad file changes nothing and its error names the key and the value.

#include "server/config_reload.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/testing/test_dir.h"

namespace gpusched::server {
namespace {

class ConfigReloadTest : public ::testing::Test {
 protected:
  void Write(const std::string& text) { std::ofstream(path_) << text; }
  ConfigReloader Open(const std::string& text) {
    Write(text);
    ServerConfig c;
    EXPECT_TRUE(ApplyConfigFile(path_, c).ok());
    StatusOr<ConfigReloader> r = ConfigReloader::Open(path_, c);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return std::move(r).value();
  }
  gpusched::testing::TestDir dir_{"gpusched_reload_test"};
  std::string path_ = (dir_ / "server.yaml").string();
};

TEST_F(ConfigReloadTest, Issue39_LiveKeysAreAppliedOthersNeedARestart) {
  ConfigReloader r = Open("t1: 5s\nkill_grace: 10s\nprobe_timeout: 1s\n");
  Write("t1: 2s\nkill_grace: 20s\nnode_timeout: 20s\nnode_lost_after: 1m\n");
  StatusOr<ConfigReload> plan = r.Plan();
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->applied, (std::vector<std::string>{"node_lost_after", "node_timeout", "t1"}));
  // kill_grace changed, probe_timeout was removed (its default returns at a restart).
  EXPECT_EQ(plan->needs_restart, (std::vector<std::string>{"kill_grace", "probe_timeout"}));
  EXPECT_EQ(plan->next.scheduler.t1_ms, 2000);
  EXPECT_EQ(plan->next.scheduler.node_timeout_ms, 20'000);
  EXPECT_EQ(plan->next.kill_grace_ms, 10'000);  // the running value stays
  r.Accept(*plan);
  // Applied keys are the baseline now; restart-only ones are reported until a restart.
  StatusOr<ConfigReload> again = r.Plan();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->applied.empty());
  EXPECT_EQ(again->needs_restart, (std::vector<std::string>{"kill_grace", "probe_timeout"}));
}

TEST_F(ConfigReloadTest, Issue39_ABadFileIsRefusedNamingTheKeyAndTheValue) {
  ConfigReloader r = Open("t1: 5s\n");
  Write("t1: soon\n");
  StatusOr<ConfigReload> plan = r.Plan();
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("t1"), std::string::npos) << plan.status().message();
  EXPECT_NE(plan.status().message().find("soon"), std::string::npos) << plan.status().message();
  Write("node_timeout: 10m\n");  // valid keys, invalid whole: node_lost_after (5m) < it
  plan = r.Plan();
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("node_lost_after"), std::string::npos)
      << plan.status().message();
  Write("t1: [1\n");
  EXPECT_EQ(r.Plan().status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpusched::server
