// Issue 39: the agent's record of the cluster its task files belong to, and the move of an
// old cluster's files aside.
#include "agent/cluster_identity.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/testing/test_dir.h"

namespace gpusched::agent {
namespace {

constexpr char kOld[] = "0123456789abcdef0123456789abcdef";
constexpr char kNew[] = "fedcba9876543210fedcba9876543210";

void Write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string Contents(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ClusterIdentityTest, Issue39_NoFileIsNoIdAndARecordedIdReadsBack) {
  gpusched::testing::TestDir dir("gpusched_cluster_identity");
  ClusterIdentity identity(dir.path().string());
  auto none = identity.Read();
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, "");
  ASSERT_TRUE(identity.Record(kOld).ok());
  ASSERT_TRUE(identity.Record(kNew).ok());  // replaces it
  EXPECT_EQ(identity.Read().value(), kNew);
  EXPECT_EQ(Contents(dir / "cluster_id"), std::string(kNew) + "\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "cluster_id.tmp"));
  struct stat st {};
  ASSERT_EQ(stat((dir / "cluster_id").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(ClusterIdentityTest, Issue39_AnIdThatIsNotOneIsNeverRecorded) {
  gpusched::testing::TestDir dir("gpusched_cluster_identity");
  ClusterIdentity identity(dir.path().string());
  ASSERT_TRUE(identity.Record(kOld).ok());
  const Status s = identity.Record("../../etc");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("\"../../etc\""), std::string::npos) << s.ToString();
  EXPECT_EQ(identity.Read().value(), kOld);
}

// A damaged file is an error that names the file, what it holds and what to do, not "no
// id": the agent cannot tell whose tasks its files are.
TEST(ClusterIdentityTest, Issue39_ACorruptFileIsAnErrorNamingItAndTheFix) {
  gpusched::testing::TestDir dir("gpusched_cluster_identity");
  Write(dir / "cluster_id", "0123456789abcdef\x01garbage");
  auto id = ClusterIdentity(dir.path().string()).Read();
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = id.status().message();
  EXPECT_NE(m.find((dir / "cluster_id").string()), std::string::npos) << m;
  EXPECT_NE(m.find("\"0123456789abcdef?garbage\""), std::string::npos) << m;
  EXPECT_NE(m.find("Remove it"), std::string::npos) << m;
}

TEST(ClusterIdentityTest, Issue39_ArchiveMovesLogsAndJournalButTheLockAndOverwritesNothing) {
  gpusched::testing::TestDir dir("gpusched_cluster_identity");
  ClusterIdentity identity(dir.path().string());
  Write(dir / "logs/task-1-1.log", "old\n");
  Write(dir / "logs/task-1-1.log.peak", "12");
  Write(dir / "journal/1-1.run", "pid=1\n");
  Write(dir / "journal/lock", "");
  auto moved = identity.ArchiveTaskFiles(kOld);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 3);
  const std::filesystem::path archive = dir / "clusters" / kOld;
  EXPECT_EQ(Contents(archive / "logs/task-1-1.log"), "old\n");
  EXPECT_TRUE(std::filesystem::exists(archive / "logs/task-1-1.log.peak"));
  EXPECT_TRUE(std::filesystem::exists(archive / "journal/1-1.run"));
  EXPECT_TRUE(std::filesystem::is_empty(dir / "logs"));
  EXPECT_TRUE(std::filesystem::exists(dir / "journal/lock"));  // the running agent's
  EXPECT_FALSE(std::filesystem::exists(archive / "journal/lock"));
  struct stat st {};
  ASSERT_EQ(stat((archive / "logs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // The same cluster left a second time (A, B, A, B): the earlier archive stays as it was.
  Write(dir / "logs/task-1-1.log", "again\n");
  ASSERT_EQ(identity.ArchiveTaskFiles(kOld).value(), 1);
  EXPECT_EQ(Contents(archive / "logs/task-1-1.log"), "old\n");
  EXPECT_EQ(Contents(archive / "logs/task-1-1.log.1"), "again\n");
  EXPECT_EQ(identity.ArchiveTaskFiles("not/an/id").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpusched::agent
