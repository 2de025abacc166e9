// LoopInbox (issue 40: the control plane's two inboxes, split out of ControlPlane): order,
// who must wake the loop, the bounds (a handler waits for room, a submission is refused) and
// closing.

#include "server/loop_inbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace gpusched::server {
namespace {

PostedMessage Beat(const std::string& node) {
  PostedMessage m;
  m.node = node;
  m.message = core::NodeHeartbeat{};
  return m;
}

PostedSubmission Sub(const std::string& key, std::vector<std::string>* answers) {
  PostedSubmission s;
  s.specs.resize(1);
  s.key = key;
  s.done = [answers, key](StatusOr<std::vector<TaskId>> ids) {
    answers->push_back(key + (ids.ok() ? ":ok" : ":" + ids.status().message()));
  };
  return s;
}

TEST(LoopInboxTest, Issue40_TheFirstPostOfEitherKindWakesTheLoopAndTakesKeepTheOrder) {
  LoopInbox inbox(8);
  std::vector<std::string> answers;
  bool first = false;
  ASSERT_EQ(inbox.PostSubmission(Sub("k1", &answers), &first), "");
  EXPECT_TRUE(first);
  ASSERT_TRUE(inbox.PostMessage(Beat("a"), &first));
  EXPECT_FALSE(first);  // a keyed submission waits: the loop was woken already
  ASSERT_EQ(inbox.PostSubmission(Sub("", &answers), &first), "");
  ASSERT_TRUE(inbox.PostMessage(Beat("b"), &first));
  LoopInbox::Taken taken = inbox.Take();
  ASSERT_EQ(taken.messages.size(), 2u);
  EXPECT_EQ(taken.messages[0].node, "a");
  EXPECT_EQ(taken.messages[1].node, "b");
  EXPECT_EQ(taken.submissions.size(), 1u);  // the keyed one is taken apart
  EXPECT_EQ(inbox.TakeKeyed().size(), 1u);
  ASSERT_TRUE(inbox.PostMessage(Beat("c"), &first));
  EXPECT_TRUE(first);  // everything was taken
}

// Issue 43: a routine heartbeat never wakes the loop (the next round takes it, with every
// other one posted meanwhile); an urgent message wakes it even behind routine ones, once.
TEST(LoopInboxTest, Issue43_RoutineBeatsWaitForTheNextRoundAndNeverHoldBackAnUrgentPost) {
  LoopInbox inbox(8);
  bool wake = true;
  ASSERT_TRUE(inbox.PostMessage(Beat("a"), &wake, /*urgent=*/false));
  EXPECT_FALSE(wake);
  ASSERT_TRUE(inbox.PostMessage(Beat("b"), &wake, false));
  EXPECT_FALSE(wake);
  ASSERT_TRUE(inbox.PostMessage(Beat("c"), &wake, /*urgent=*/true));
  EXPECT_TRUE(wake);  // behind two routine beats: the inbox was not empty
  ASSERT_TRUE(inbox.PostMessage(Beat("d"), &wake, true));
  EXPECT_FALSE(wake);  // woken already
  std::vector<std::string> answers;
  ASSERT_EQ(inbox.PostSubmission(Sub("", &answers), &wake), "");
  EXPECT_FALSE(wake);
  LoopInbox::Taken taken = inbox.Take();
  ASSERT_EQ(taken.messages.size(), 4u);
  EXPECT_EQ(taken.messages[0].node, "a");
  EXPECT_EQ(taken.messages[3].node, "d");
  ASSERT_TRUE(inbox.PostMessage(Beat("e"), &wake, false));
  EXPECT_FALSE(wake);
  ASSERT_EQ(inbox.PostSubmission(Sub("", &answers), &wake), "");
  EXPECT_TRUE(wake);  // a submission is urgent
}

TEST(LoopInboxTest, Issue40_AFullMessageInboxHoldsTheHandlerAFullSubmissionInboxRefuses) {
  LoopInbox inbox(2);
  bool first = false;
  ASSERT_TRUE(inbox.PostMessage(Beat("a"), &first));
  ASSERT_TRUE(inbox.PostMessage(Beat("b"), &first));
  std::atomic<bool> posted{false};
  std::thread handler([&] {
    bool f = false;
    posted = inbox.PostMessage(Beat("c"), &f);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // it waits for room
  EXPECT_FALSE(posted);
  EXPECT_EQ(inbox.Take().messages.size(), 2u);
  handler.join();
  EXPECT_TRUE(posted);
  EXPECT_EQ(inbox.Take().messages.size(), 1u);

  std::vector<std::string> answers;
  ASSERT_EQ(inbox.PostSubmission(Sub("", &answers), &first), "");
  ASSERT_EQ(inbox.PostSubmission(Sub("k", &answers), &first), "");
  EXPECT_EQ(inbox.PostSubmission(Sub("", &answers), &first),
            "busy: 2 submissions wait for its loop");
}

TEST(LoopInboxTest, Issue40_CloseHandsBackWhatWasNotTakenAndRefusesTheRest) {
  LoopInbox inbox(1);
  bool first = false;
  ASSERT_TRUE(inbox.PostMessage(Beat("a"), &first));
  std::atomic<int> result{-1};
  std::thread handler([&] {  // waits for room that never comes: Close releases it
    bool f = false;
    result = inbox.PostMessage(Beat("b"), &f) ? 1 : 0;
  });
  std::vector<std::string> answers;
  ASSERT_EQ(inbox.PostSubmission(Sub("k", &answers), &first), "");
  PostedRegistration reg;
  reg.reg.spec.name = "n1";
  ASSERT_EQ(inbox.PostRegistration(std::move(reg), &first), "");
  LoopInbox::Closed left = inbox.Close();
  handler.join();
  EXPECT_EQ(result, 0);
  ASSERT_EQ(left.submissions.size(), 1u);
  EXPECT_EQ(left.submissions[0].key, "k");
  ASSERT_EQ(left.registrations.size(), 1u);
  EXPECT_EQ(left.registrations[0].reg.spec.name, "n1");
  EXPECT_EQ(inbox.PostSubmission(Sub("", &answers), &first), "stopping");
  EXPECT_EQ(inbox.PostRegistration(PostedRegistration{}, &first), "stopping");
  EXPECT_FALSE(inbox.PostMessage(Beat("c"), &first));
  EXPECT_TRUE(answers.empty());  // the inbox answers nobody: its owner does
}

}  // namespace
}  // namespace gpusched::server
