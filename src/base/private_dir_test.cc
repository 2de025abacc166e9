#include "base/private_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace gpusched {
namespace {

class PrivateDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/private_dir_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(PrivateDirTest, CreatesMissingDirectoriesWithMode0700) {
  const std::string dir = root_ + "/a/b/data";
  ASSERT_TRUE(EnsurePrivateDir(dir, "data-dir").ok());
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_TRUE(EnsurePrivateDir(dir + "/", "data-dir").ok());  // again: already right
}

TEST_F(PrivateDirTest, Issue35_RefusesADirectoryOthersCanWrite) {
  const std::string dir = root_ + "/shared";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0770), 0);
  Status s = EnsurePrivateDir(dir, "data-dir");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("writable by its group"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("0770"), std::string::npos) << s.message();
  ASSERT_EQ(chmod(dir.c_str(), 0757), 0);
  s = EnsurePrivateDir(dir, "data-dir");
  EXPECT_NE(s.message().find("every user"), std::string::npos) << s.message();
}

TEST_F(PrivateDirTest, Issue35_RefusesASymlinkEvenToAGoodDirectory) {
  const std::string real = root_ + "/real", link = root_ + "/link";
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  Status s = EnsurePrivateDir(link, "data-dir");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("symbolic link"), std::string::npos) << s.message();
}

TEST(DefaultStateDirTest, NeverUnderTmp) {
  const std::string d = DefaultStateDir("agent-n1");
  EXPECT_EQ(d.rfind("/tmp", 0), std::string::npos) << d;
  EXPECT_NE(d.find("gpusched/agent-n1"), std::string::npos) << d;
  if (geteuid() == 0) EXPECT_EQ(d, "/var/lib/gpusched/agent-n1");
}

}  // namespace
}  // namespace gpusched
