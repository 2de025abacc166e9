#include "agent/task_credentials.h"

#include <gtest/gtest.h>

#include <string>

namespace gpusched::agent {
namespace {

TEST(TaskCredentialsTest, RoundTrips) {
  TaskCredentials c;
  c.uid = 1001;
  c.gid = 1002;
  c.group_count = 3;
  c.groups[0] = 1002;
  c.groups[1] = 27;
  c.groups[2] = 4294967294u;
  char buf[128];
  ASSERT_GT(FormatTaskCredentials(c, buf, sizeof buf), 0u);
  EXPECT_STREQ(buf, "1001:1002:1002,27,4294967294");
  TaskCredentials back;
  ASSERT_TRUE(ParseTaskCredentials(buf, &back));
  EXPECT_EQ(back.uid, 1001u);
  EXPECT_EQ(back.gid, 1002u);
  ASSERT_EQ(back.group_count, 3u);
  EXPECT_EQ(back.groups[2], 4294967294u);
}

TEST(TaskCredentialsTest, EmptyGroupList) {
  TaskCredentials c;
  ASSERT_TRUE(ParseTaskCredentials("5:6:", &c));
  EXPECT_EQ(c.uid, 5u);
  EXPECT_EQ(c.group_count, 0u);
}

TEST(TaskCredentialsTest, RefusesMalformed) {
  TaskCredentials c;
  for (const char* bad : {"", "1", "1:2", "1:2:3,", "1:2:,3", "a:2:", "1:2:3x", "-1:2:",
                          "4294967295:0:", "99999999999:0:", "1:2:3,,4", " 1:2:"}) {
    EXPECT_FALSE(ParseTaskCredentials(bad, &c)) << bad;
  }
  EXPECT_FALSE(ParseTaskCredentials(nullptr, &c));
  std::string many = "1:1:";
  for (size_t i = 0; i <= kMaxTaskGroups; ++i) many += (i ? ",": "") + std::to_string(i);
  EXPECT_FALSE(ParseTaskCredentials(many.c_str(), &c));
}

TEST(TaskCredentialsTest, FormatRefusesSmallBuffer) {
  TaskCredentials c;
  c.uid = 123456;
  char buf[4];
  EXPECT_EQ(FormatTaskCredentials(c, buf, sizeof buf), 0u);
}

}  // namespace
}  // namespace gpusched::agent
