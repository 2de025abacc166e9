#include "base/thread_name.h"

#include <pthread.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace gpusched {
namespace {

std::string NameOf(pthread_t t) {
  char name[32] = {};
  EXPECT_EQ(pthread_getname_np(t, name, sizeof name), 0);
  return name;
}

TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  const std::string before = NameOf(pthread_self());
  std::string inside;
  std::thread t([&] {
    NameThisThread("gs-test");
    inside = NameOf(pthread_self());
  });
  t.join();
  EXPECT_EQ(inside, "gs-test");
  EXPECT_EQ(NameOf(pthread_self()), before);
}

TEST(ThreadNameTest, ALongNameIsCutToWhatLinuxKeeps) {
  std::string inside;
  std::thread t([&] {
    NameThisThread("gs-a-name-longer-than-fifteen");
    inside = NameOf(pthread_self());
  });
  t.join();
  EXPECT_EQ(inside, "gs-a-name-longe");  // 15 characters
}

}  // namespace
}  // namespace gpusched
