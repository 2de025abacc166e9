// Issue 41: the forms users name tasks by, and the refusals that name the text.

#include "base/task_id_spec.h"

#include <gtest/gtest.h>

namespace gpusched {
namespace {

using Kind = TaskIdSpec::Kind;

TEST(TaskIdSpecTest, Issue41_EachFormParsesToWhatItNames) {
  auto id = ParseTaskIdSpec("12", "id");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->kind, Kind::kId);
  EXPECT_EQ(id->first, 12u);
  auto range = ParseTaskIdSpec("12-20", "id");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->kind, Kind::kRange);
  EXPECT_EQ(range->first, 12u);
  EXPECT_EQ(range->last, 20u);
  auto array = ParseTaskIdSpec("12.*", "id");
  ASSERT_TRUE(array.ok());
  EXPECT_EQ(array->kind, Kind::kArray);
  EXPECT_EQ(array->first, 12u);
  auto index = ParseTaskIdSpec("12.0", "id");
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->kind, Kind::kArrayIndex);
  EXPECT_EQ(index->index, 0);
}

TEST(TaskIdSpecTest, Issue41_RefusalsNameTheFieldAndTheText) {
  for (const char* bad : {"", "0", "-1", "+3", " 3", "3 ", "20-12", "1-", "-5", "x.*", "0.*",
                          "12.", "12.-1", "12.**", "12.3.4", "99999999999999999999", "1e3"}) {
    auto r = ParseTaskIdSpec(bad, "cancel");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind(std::string("cancel: \"") + bad + "\"", 0), 0u)
        << r.status().message();
  }
}

}  // namespace
}  // namespace gpusched
