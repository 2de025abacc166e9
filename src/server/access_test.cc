#include "server/access.h"

#include <gtest/gtest.h>

namespace gpusched::server {
namespace {

v1::Task AlicesTask() {
  v1::Task t;
  t.set_id(7);
  v1::TaskSpec* s = t.mutable_spec();
  s->set_user("alice");
  s->set_team("ml");
  s->add_command("train.py");
  s->add_command("--password=hunter2");
  s->set_workdir("/home/alice/secret-project");
  (*s->mutable_env())["WANDB_API_KEY"] = "w-secret";
  return t;
}

const Caller kAlice{"alice", "ml", false, "a"};
const Caller kBob{"bob", "ml", false, "b"};
const Caller kAdmin{"admin", "default", true, "c"};

TEST(RedactForCaller, Issue36_AnotherUserGetsNoEnvironmentButTheOwnerAndAnAdminDo) {
  for (const Caller* c : {&kAlice, &kAdmin}) {
    v1::Task t = AlicesTask();
    RedactForCaller(*c, /*private_data=*/true, &t);
    EXPECT_EQ(t.spec().env().at("WANDB_API_KEY"), "w-secret") << c->user;
    EXPECT_EQ(t.spec().command_size(), 2) << c->user;
    EXPECT_EQ(t.redacted_size(), 0) << c->user;
  }
  v1::Task t = AlicesTask();
  RedactForCaller(kBob, /*private_data=*/false, &t);
  EXPECT_TRUE(t.spec().env().empty());
  ASSERT_EQ(t.redacted_size(), 1);
  EXPECT_EQ(t.redacted(0), "env");
  // Without private_data the command and working directory stay public (as before).
  EXPECT_EQ(t.spec().command(1), "--password=hunter2");
  EXPECT_EQ(t.spec().workdir(), "/home/alice/secret-project");
  EXPECT_EQ(t.spec().user(), "alice");
}

TEST(RedactForCaller, Issue36_PrivateDataAlsoHidesTheCommandAndWorkingDirectory) {
  v1::Task t = AlicesTask();
  RedactForCaller(kBob, /*private_data=*/true, &t);
  EXPECT_TRUE(t.spec().env().empty());
  EXPECT_EQ(t.spec().command_size(), 0);
  EXPECT_EQ(t.spec().workdir(), "");
  EXPECT_EQ(std::vector<std::string>(t.redacted().begin(), t.redacted().end()),
            (std::vector<std::string>{"env", "command", "workdir"}));
  EXPECT_EQ(t.spec().user(), "alice");  // who owns it stays visible (ls USER)
  EXPECT_EQ(t.id(), 7u);
}

TEST(RedactForCaller, ATaskWithoutAnOwnerIsAnAdminsOnly) {
  v1::Task t = AlicesTask();
  t.mutable_spec()->clear_user();
  const Caller nameless{"", "default", false, ""};
  RedactForCaller(nameless, false, &t);
  EXPECT_TRUE(t.spec().env().empty());
}

}  // namespace
}  // namespace gpusched::server
