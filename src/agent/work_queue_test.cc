// AgentWorkQueue (issue 40: split out of Agent::Impl): the server's messages reach the work
// thread in the order received, only assignments are bounded, and closing wakes the work
// thread.

#include "agent/work_queue.h"

#include <gtest/gtest.h>

#include <thread>

namespace gpusched::agent {
namespace {

namespace v1 = ::gpusched::v1;

v1::ServerMessage Assign(uint64_t id) {
  v1::ServerMessage m;
  m.mutable_assign()->set_id(id);
  m.mutable_assign()->set_attempt(1);
  return m;
}

v1::ServerMessage Kill(uint64_t id) {
  v1::ServerMessage m;
  m.mutable_kill()->set_id(id);
  m.mutable_kill()->set_attempt(1);
  return m;
}

v1::ServerMessage Ack(uint64_t id) {
  v1::ServerMessage m;
  m.mutable_ack()->set_id(id);
  m.mutable_ack()->set_attempt(1);
  return m;
}

// A kill queued behind an assignment of the same task reaches the work thread after it.
TEST(AgentWorkQueueTest, Issue40_OrderKept) {
  std::mutex mu;
  AgentWorkQueue q;
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(q.Push(Assign(1)));
  ASSERT_TRUE(q.Push(Kill(1)));
  ASSERT_TRUE(q.Push(Assign(2)));
  ASSERT_TRUE(q.Push(Ack(3)));
  EXPECT_EQ(q.QueuedAssigns(), (std::vector<TaskKey>{{1, 1}, {2, 1}}));
  std::optional<v1::ServerMessage> m = q.Pop(lock);
  ASSERT_TRUE(m && m->has_assign());
  EXPECT_EQ(m->assign().id(), 1u);
  m = q.Pop(lock);
  ASSERT_TRUE(m && m->has_kill());
  EXPECT_EQ(m->kill().id(), 1u);
  m = q.Pop(lock);
  ASSERT_TRUE(m && m->has_assign());
  EXPECT_EQ(m->assign().id(), 2u);
  m = q.Pop(lock);
  ASSERT_TRUE(m && m->has_ack());
  EXPECT_EQ(m->ack().id(), 3u);
  EXPECT_TRUE(q.QueuedAssigns().empty());
}

// Past the bound an assignment is refused (nothing queued), while kills and acks still are;
// a popped assignment frees its place.
TEST(AgentWorkQueueTest, Issue40_BoundRefusesOnlyAssignments) {
  std::mutex mu;
  AgentWorkQueue q(2);
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(q.Push(Assign(1)));
  ASSERT_TRUE(q.Push(Assign(2)));
  EXPECT_FALSE(q.Push(Assign(3)));
  EXPECT_TRUE(q.Push(Kill(1)));
  EXPECT_TRUE(q.Push(Ack(7)));
  EXPECT_EQ(q.QueuedAssigns(), (std::vector<TaskKey>{{1, 1}, {2, 1}}));
  ASSERT_TRUE(q.Pop(lock));  // assignment 1: being launched, no longer queued
  EXPECT_TRUE(q.Push(Assign(3)));
  EXPECT_FALSE(q.Push(Assign(4)));
  EXPECT_EQ(AgentWorkQueue().max_assigns(), 1024u);
}

// Close wakes a Pop waiting on another thread, and Pop returns nothing once closed, even
// with messages queued.
TEST(AgentWorkQueueTest, Issue40_CloseWakesWaitingPop) {
  std::mutex mu;
  AgentWorkQueue q;
  bool woke_empty = false;
  std::thread worker([&] {
    std::unique_lock<std::mutex> lock(mu);
    woke_empty = !q.Pop(lock).has_value();
  });
  {
    std::lock_guard<std::mutex> lock(mu);
    q.Close();
  }
  worker.join();
  EXPECT_TRUE(woke_empty);
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(q.Push(Kill(1)));
  EXPECT_FALSE(q.Pop(lock).has_value());
}

// A Push on another thread wakes a waiting Pop with that message.
TEST(AgentWorkQueueTest, Issue40_PushWakesWaitingPop) {
  std::mutex mu;
  AgentWorkQueue q;
  std::optional<v1::ServerMessage> got;
  std::thread worker([&] {
    std::unique_lock<std::mutex> lock(mu);
    got = q.Pop(lock);
  });
  {
    std::lock_guard<std::mutex> lock(mu);
    q.Push(Ack(5));
  }
  worker.join();
  ASSERT_TRUE(got && got->has_ack());
  EXPECT_EQ(got->ack().id(), 5u);
}

// `launching` is the assignment popped and not yet Done (kills and acks are not); Clear drops
// what is queued but not it (the agent marks it as the old cluster's).
TEST(AgentWorkQueueTest, Issue40_LaunchingUntilDone) {
  std::mutex mu;
  AgentWorkQueue q;
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_FALSE(q.launching());
  q.Push(Assign(4));
  q.Push(Kill(9));
  q.Push(Assign(5));
  ASSERT_TRUE(q.Pop(lock));
  EXPECT_EQ(q.launching(), TaskKey(4, 1));
  q.Done();
  EXPECT_FALSE(q.launching());
  ASSERT_TRUE(q.Pop(lock));  // the kill
  EXPECT_FALSE(q.launching());
  q.Done();
  ASSERT_TRUE(q.Pop(lock));
  EXPECT_EQ(q.launching(), TaskKey(5, 1));
  q.Push(Assign(6));
  q.Clear();
  EXPECT_TRUE(q.QueuedAssigns().empty());
  EXPECT_EQ(q.launching(), TaskKey(5, 1));
  EXPECT_TRUE(q.Push(Assign(7)));
  q.Close();
  EXPECT_FALSE(q.Pop(lock));
}

}  // namespace
}  // namespace gpusched::agent
