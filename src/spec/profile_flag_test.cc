// `submit --profile` (spec/profile_flag.h).

#include "spec/profile_flag.h"

#include <gtest/gtest.h>

namespace gpusched::spec {
namespace {

TEST(ProfileFlag, ModelAloneAndEveryField) {
  auto p = ParseProfileFlag("resnet50", "--profile");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, (core::MemoryProfile{"", "resnet50", 1, 0, 0}));
  auto full = ParseProfileFlag("resnet50,type=classify,batch=32,size=224x320", "--profile");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(*full, (core::MemoryProfile{"classify", "resnet50", 32, 224, 320}));
}

TEST(ProfileFlag, BadInputNamesTheFlagAndTheValue) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "--profile: \"\": begin with the model, e.g. resnet50,batch=32"},
      {"batch=3", "--profile: \"batch=3\": begin with the model, e.g. resnet50,batch=32"},
      {"r,batch=0", "--profile: \"r,batch=0\": batch \"0\" is not a whole number from 1 to 1000000"},
      {"r,batch=2x", "--profile: \"r,batch=2x\": batch \"2x\" is not a whole number from 1 to 1000000"},
      {"r,size=224", "--profile: \"r,size=224\": size \"224\" is not HEIGHTxWIDTH in pixels, e.g. 224x224"},
      {"r,colour=red", "--profile: \"r,colour=red\": \"colour=red\" is not type=T, batch=N or size=HxW"},
      {"r,", "--profile: \"r,\": \"\" is not type=T, batch=N or size=HxW"},
  };
  for (const auto& [text, message] : cases) {
    auto p = ParseProfileFlag(text, "--profile");
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(p.status().message(), message);
  }
}

}  // namespace
}  // namespace gpusched::spec
