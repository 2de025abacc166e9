#include "spec/env_export.h"

#include <gtest/gtest.h>

#include "spec/spec_yaml.h"

namespace gpusched::spec {
namespace {

const std::map<std::string, std::string> kCaller = {{"HOME", "/home/a"},
                                                    {"WANDB_KEY", "w-secret"},
                                                    {"GPUSCHED_TOKEN", "gst_x_y"},
                                                    {"GPUSCHED_SERVER", "10.0.0.1:7070"},
                                                    {"PATH", "/usr/bin"}};

std::map<std::string, std::string> Sent(const std::string& flag) {
  StatusOr<EnvExport> rule = ParseEnvExport(flag, "--export");
  EXPECT_TRUE(rule.ok()) << rule.status().ToString();
  return rule.ok() ? ExportedEnv(*rule, kCaller) : std::map<std::string, std::string>{};
}

std::string Error(const std::string& flag) {
  StatusOr<EnvExport> rule = ParseEnvExport(flag, "--export");
  return rule.ok() ? "" : rule.status().message();
}

TEST(EnvExport, Issue36_AllSendsEveryVariableButGpuschedsOwnTheTokenAbove) {
  const auto sent = Sent("ALL");
  EXPECT_EQ(sent.count("GPUSCHED_TOKEN"), 0u);
  EXPECT_EQ(sent.count("GPUSCHED_SERVER"), 0u);
  EXPECT_EQ(sent, (std::map<std::string, std::string>{
                      {"HOME", "/home/a"}, {"PATH", "/usr/bin"}, {"WANDB_KEY", "w-secret"}}));
}

TEST(EnvExport, NoneSendsNothingAndNamesSendTheirValuesAndExplicitValuesWin) {
  EXPECT_TRUE(Sent("NONE").empty());
  EXPECT_TRUE(Sent("all").empty());  // a variable named "all" (unset here), not ALL
  EXPECT_EQ(Sent("HOME,UNSET_HERE"), (std::map<std::string, std::string>{{"HOME", "/home/a"}}));
  EXPECT_EQ(Sent("HOME=/x,A=b=c"),
            (std::map<std::string, std::string>{{"HOME", "/x"}, {"A", "b=c"}}));
  const auto all = Sent("ALL,HOME=/elsewhere,EMPTY=");
  EXPECT_EQ(all.at("HOME"), "/elsewhere");
  EXPECT_EQ(all.at("EMPTY"), "");
  EXPECT_EQ(all.count("GPUSCHED_TOKEN"), 0u);
}

TEST(EnvExport, Issue36_NamingAReservedVariableIsRefusedNamingIt) {
  EXPECT_NE(Error("GPUSCHED_TOKEN").find("--export: GPUSCHED_TOKEN is reserved"),
            std::string::npos)
      << Error("GPUSCHED_TOKEN");
  EXPECT_NE(Error("ALL,GPUSCHED_TASK_CREDS=0:0").find("GPUSCHED_TASK_CREDS is reserved"),
            std::string::npos);
}

TEST(EnvExport, BadItemsAreRefusedNamingThem) {
  EXPECT_NE(Error("").find("--export: empty"), std::string::npos) << Error("");
  EXPECT_NE(Error("A,,B").find("an empty item"), std::string::npos);
  EXPECT_NE(Error("NONE,HOME").find("NONE takes no other item"), std::string::npos);
  EXPECT_NE(Error("1X").find("\"1X\" is not ALL, NONE, VAR or VAR=VALUE"), std::string::npos);
  EXPECT_NE(Error("A B").find("\"A B\""), std::string::npos);
  EXPECT_NE(Error("=v").find("\"=v\""), std::string::npos);
}

TEST(EnvExport, AJobFileTakesExportAsAStringOrAList) {
  auto file = ParseJobFileYaml("command: [true]\nexport: ALL\n", "job.yaml");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_TRUE(file->export_env.has_value());
  EXPECT_TRUE(file->export_env->all);
  file = ParseJobFileYaml("command: [true]\nexport: [HOME, \"LIST=a,b\"]\n", "job.yaml");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(ExportedEnv(*file->export_env, kCaller),
            (std::map<std::string, std::string>{{"HOME", "/home/a"}, {"LIST", "a,b"}}));
  file = ParseJobFileYaml("command: [true]\n", "job.yaml");
  ASSERT_TRUE(file.ok());
  EXPECT_FALSE(file->export_env.has_value());
  file = ParseJobFileYaml("command: [true]\nexport: GPUSCHED_TOKEN\n", "job.yaml");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("job.yaml:2: export: GPUSCHED_TOKEN is reserved"),
            std::string::npos)
      << file.status().message();
}

TEST(EnvExport, Issue36_AJobFilesEnvWithAReservedNameIsRefusedNamingItAndItsLine) {
  auto file = ParseJobFileYaml("command: [true]\nenv:\n  A: b\n  GPUSCHED_TASK_CREDS: \"0:0:\"\n",
                               "job.yaml");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("job.yaml:3: env: GPUSCHED_TASK_CREDS is reserved"),
            std::string::npos)
      << file.status().message();
}

}  // namespace
}  // namespace gpusched::spec
