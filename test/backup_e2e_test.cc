// Issue 39, "Durable by default": `gpusched admin backup FILE` taken while clients submit,
// `gpusched admin restore FILE --data-dir DIR`, and a second server started on DIR, all
// through the real binaries.

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {

using BackupTest = ClusterTest;

std::set<uint64_t> Ids(const std::string& ls_json) {
  std::set<uint64_t> out;
  for (const Json& t : Json::parse(ls_json)) out.insert(t["id"].get<uint64_t>());
  return out;
}

// Every task acknowledged before the backup began is in the restored store, and nothing that
// was never acknowledged is.
TEST_F(BackupTest, Issue39_ABackupTakenUnderLoadHoldsEveryAcknowledgedTaskAndRestores) {
  std::mutex mu;
  std::set<uint64_t> acked;
  for (int i = 0; i < 5; ++i) acked.insert(Submit({"--", "true"}));
  std::atomic<bool> stop{false};
  std::thread client([&] {
    while (!stop.load()) {
      CliResult r = Run({"submit", "--", "true"});
      if (r.code == 0) {
        std::lock_guard<std::mutex> lock(mu);
        acked.insert(std::stoull(r.out));
      }
    }
  });
  ASSERT_TRUE(PollUntil([&] { std::lock_guard<std::mutex> lock(mu); return acked.size() >= 8; },
                        kDeadline));
  std::set<uint64_t> before;
  {
    std::lock_guard<std::mutex> lock(mu);
    before = acked;
  }
  const std::string file = path("backup.db");
  CliResult backup = Cli({"admin", "backup", "--server", server(), file, "--json"});
  stop = true;
  client.join();
  ASSERT_EQ(backup.code, 0) << backup.err;
  const Json b = Json::parse(backup.out);
  EXPECT_EQ(b["file"], file);
  EXPECT_GE(b["tasks"].get<int64_t>(), static_cast<int64_t>(before.size()));
  EXPECT_FALSE(std::filesystem::exists(file + ".partial"));

  const std::string dir2 = path("restored");
  CliResult restore = Cli({"admin", "restore", file, "--data-dir", dir2});
  ASSERT_EQ(restore.code, 0) << restore.err;
  EXPECT_NE(restore.out.find("restored "), std::string::npos) << restore.out;
  CliResult again = Cli({"admin", "restore", file, "--data-dir", dir2});
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.err.find("exists"), std::string::npos) << again.err;

  const std::string second = "127.0.0.1:" + std::to_string(FreePort());
  Proc restored({"server", "--listen", second, "--data-dir", dir2, "--config",
                 path("server.yaml")},
                path("restored.log"));
  CliResult ls;
  ASSERT_TRUE(PollUntil(
      [&] {
        ls = Cli({"ls", "--all", "--json", "--server", second});
        return ls.code == 0;
      },
      kDeadline))
      << ReadFile(path("restored.log"));
  const std::set<uint64_t> stored = Ids(ls.out);
  for (uint64_t id : before) EXPECT_TRUE(stored.count(id)) << "acknowledged task " << id << " lost";
  for (uint64_t id : stored) EXPECT_TRUE(acked.count(id)) << "task " << id << " never acknowledged";
  EXPECT_EQ(static_cast<int64_t>(stored.size()), b["tasks"].get<int64_t>());
  restored.Kill(SIGTERM);
}

// A file that is not a store is refused, and nothing is left in the data directory.
TEST_F(BackupTest, Issue39_RestoreRefusesAFileThatIsNotAStore) {
  WriteFile(path("junk.db"), "not a database, only text\n");
  CliResult r = Cli({"admin", "restore", path("junk.db"), "--data-dir", path("d")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is not a gpusched store"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(path("d/state.db")));
  EXPECT_FALSE(std::filesystem::exists(path("d/state.db.partial")));
  CliResult missing = Cli({"admin", "restore", path("none.db"), "--data-dir", path("d")});
  EXPECT_EQ(missing.code, 2) << missing.err;
}

// The snapshot holds every user's tasks and tokens' hashes: for admins only.
TEST_F(AuthClusterTest, Issue39_BackupIsForAdminsOnly) {
  const std::string alice = CreateToken("alice", "vision");
  CliResult denied = Cli({"admin", "backup", "--server", server(), path("b.db")},
                         {{"GPUSCHED_TOKEN", alice}});
  EXPECT_EQ(denied.code, 4) << denied.err;
  EXPECT_FALSE(std::filesystem::exists(path("b.db")));
  EXPECT_FALSE(std::filesystem::exists(path("b.db.partial")));
  CliResult ok = Cli({"admin", "backup", "--server", server(), path("b.db")});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(std::filesystem::exists(path("b.db")));
  // Every user's tasks and the tokens' hashes: no other local user may read the file.
  using std::filesystem::perms;
  const perms mode = std::filesystem::status(path("b.db")).permissions();
  EXPECT_EQ(mode & (perms::group_all | perms::others_all), perms::none);
}

}  // namespace
}  // namespace gpusched::testing
