// Issue 39: a store whose file is removed or replaced under it is noticed and takes no writes.

#include "store/file_identity.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/testing/test_dir.h"
#include "store/sqlite_store.h"

namespace gpusched::store {
namespace {

void Touch(const std::filesystem::path& p) { std::ofstream(p) << "x"; }

TEST(FileIdentityTest, Issue39_RemovedFileIsNoticedAndStaysNoticed) {
  gpusched::testing::TestDir dir{"gpusched_identity_test"};
  const std::filesystem::path path = dir.path() / "state.db";
  Touch(path);
  StatusOr<FileIdentity> id = FileIdentity::Record(path.string());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_TRUE(id->Check().ok());
  std::filesystem::remove(path);
  Status s = id->Check();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("store file " + path.string() + " was removed"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("restart the server"), std::string::npos) << s.message();
  Touch(path);  // a file at the path again is not the one this process wrote
  EXPECT_EQ(id->Check().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(id->lost());
}

TEST(FileIdentityTest, Issue39_ReplacedFileIsNoticed) {
  gpusched::testing::TestDir dir{"gpusched_identity_test"};
  const std::filesystem::path path = dir.path() / "state.db";
  Touch(path);
  StatusOr<FileIdentity> id = FileIdentity::Record(path.string());
  ASSERT_TRUE(id.ok());
  Touch(dir.path() / "other.db");
  std::filesystem::rename(dir.path() / "other.db", path);  // same path, another inode
  Status s = id->Check();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("was replaced by another file"), std::string::npos) << s.message();
}

// What the check costs: it runs before every group commit and on every submission.
TEST(FileIdentityTest, Issue39_SqliteStoreRefusesCommitsIntoARemovedFile) {
  gpusched::testing::TestDir dir{"gpusched_identity_test"};
  const std::string path = (dir.path() / "state.db").string();
  auto store = SqliteStore::Open(path, {});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  WriteBatch batch;
  batch.tokens.push_back({"t1", "alice", "ml", false, 1, "00"});
  ASSERT_TRUE((*store)->Commit(batch).ok());
  EXPECT_TRUE((*store)->Health().ok());
  std::filesystem::remove(path);
  batch.tokens[0].id = "t2";
  Status s = (*store)->Commit(batch);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_EQ((*store)->Health().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpusched::store
