// AgentRegistry (issue 40: the control plane's agent registry, split out of ControlPlane):
// one agent per node, a reconnect replacing the old connection, the instance check, and the
// probe daemon's view (first probes, results, detaching).

#include "server/agent_registry.h"

#include <gtest/gtest.h>

#include "server/testing/fake_agent_channel.h"

namespace gpusched::server {
namespace {

using testing::FakeAgentChannel;

core::NodeState Node(const std::string& name, const std::string& address) {
  core::NodeState n;
  n.name = name;
  n.address = address;
  return n;
}

TEST(AgentRegistryTest, Issue40_ASecondConnectionReplacesTheFirstWhoseDisconnectRemovesNothing) {
  AgentRegistry agents;
  auto first = std::make_shared<FakeAgentChannel>();
  auto second = std::make_shared<FakeAgentChannel>();
  EXPECT_EQ(agents.Register("n1", "i1", first), nullptr);
  EXPECT_EQ(agents.Register("n1", "i1", first), nullptr);  // the same channel: nothing replaced
  EXPECT_EQ(agents.Register("n1", "i1", second), first);   // the caller closes it
  EXPECT_EQ(agents.Channel("n1"), second);
  EXPECT_FALSE(agents.IsCurrent("n1", first.get()));
  EXPECT_TRUE(agents.IsCurrent("n1", second.get()));
  EXPECT_FALSE(agents.Disconnected("n1", first.get()));
  EXPECT_TRUE(agents.Connected("n1"));
  EXPECT_TRUE(agents.Disconnected("n1", second.get()));
  EXPECT_FALSE(agents.Connected("n1"));
  EXPECT_EQ(agents.Channel("n1"), nullptr);
  EXPECT_FALSE(agents.Disconnected("n1", second.get()));  // once
}

TEST(AgentRegistryTest, Issue40_AnotherInstanceIsNamedByItsPeerAReconnectOfTheSameIsNot) {
  AgentRegistry agents;
  auto ch = std::make_shared<FakeAgentChannel>();
  EXPECT_EQ(agents.OtherInstancePeer("n1", "i2"), std::nullopt);  // no agent yet
  agents.Register("n1", "i1", ch);
  EXPECT_EQ(agents.OtherInstancePeer("n1", "i1"), std::nullopt);  // the same process
  EXPECT_EQ(agents.OtherInstancePeer("n1", ""), std::nullopt);    // an agent without an id
  EXPECT_EQ(agents.OtherInstancePeer("n1", "i2"), "");            // the fake's peer: unknown
  EXPECT_EQ(agents.OtherInstancePeer("n2", "i2"), std::nullopt);
  agents.Disconnected("n1", ch.get());
  EXPECT_EQ(agents.OtherInstancePeer("n1", "i2"), std::nullopt);  // nobody serves it now
  agents.Register("n1", "", ch);  // an older agent: no instance to compare
  EXPECT_EQ(agents.OtherInstancePeer("n1", "i2"), std::nullopt);
}

TEST(AgentRegistryTest, Issue40_AConnectedNodeIsReachableUntilAProbeFails) {
  AgentRegistry agents;
  auto ch = std::make_shared<FakeAgentChannel>();
  EXPECT_FALSE(agents.Reachable("n1"));
  agents.Register("n1", "i1", ch);
  EXPECT_TRUE(agents.Reachable("n1"));  // no prober: the connection proves it
  agents.SetProbeResult("n1", false);
  EXPECT_FALSE(agents.Reachable("n1"));
  agents.SetProbeResult("n1", true);
  EXPECT_TRUE(agents.Reachable("n1"));
  agents.SetProbeResult("n1", false);
  agents.Register("n1", "i1", ch);  // a registration forgets the old result
  EXPECT_TRUE(agents.Reachable("n1"));
  agents.Disconnected("n1", ch.get());
  EXPECT_FALSE(agents.Reachable("n1"));
}

TEST(AgentRegistryTest, Issue40_WithAProberANewNodeWaitsForItsFirstProbeAndIsListedFirst) {
  AgentRegistry agents;
  int woken = 0;
  EXPECT_TRUE(agents.AttachProber([&] { ++woken; }).empty());
  agents.Register("n1", "i1", std::make_shared<FakeAgentChannel>());
  agents.Register("n2", "i2", std::make_shared<FakeAgentChannel>());
  EXPECT_EQ(woken, 2);
  EXPECT_FALSE(agents.Reachable("n1"));
  agents.SetProbeResult("n1", true);
  EXPECT_TRUE(agents.Reachable("n1"));
  const std::vector<core::NodeState> nodes = {Node("n1", "h1:1"), Node("n2", "h2:1"),
                                              Node("n3", "h3:1")};  // n3: not connected
  std::vector<AgentRegistry::ProbeTarget> all = agents.ProbeTargets(nodes, false);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].node, "n1");
  EXPECT_FALSE(all[0].first);
  EXPECT_EQ(all[1].node, "n2");
  EXPECT_EQ(all[1].address, "h2:1");
  EXPECT_TRUE(all[1].first);
  std::vector<AgentRegistry::ProbeTarget> first = agents.ProbeTargets(nodes, true);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].node, "n2");
  // Detached: the nodes that waited are handed back, to be trusted by their connection.
  EXPECT_EQ(agents.AttachProber(nullptr), std::set<std::string>{"n2"});
  EXPECT_TRUE(agents.Reachable("n2"));
  agents.Register("n3", "i3", std::make_shared<FakeAgentChannel>());
  EXPECT_EQ(woken, 2);  // no wake after detaching
  EXPECT_TRUE(agents.Reachable("n3"));
}

TEST(AgentRegistryTest, Issue40_RemovingANodeForgetsItsAgentAndProbesTakeAllEmptiesIt) {
  AgentRegistry agents;
  agents.AttachProber([] {});
  auto ch = std::make_shared<FakeAgentChannel>();
  agents.Register("n1", "i1", ch);
  agents.SetProbeResult("n1", false);
  agents.ForgetProbes("n1");
  EXPECT_TRUE(agents.Reachable("n1"));  // no result and no first probe left
  EXPECT_EQ(agents.Remove("n1"), ch);
  EXPECT_FALSE(agents.Connected("n1"));
  EXPECT_EQ(agents.OtherInstancePeer("n1", "i2"), std::nullopt);
  EXPECT_EQ(agents.Remove("n1"), nullptr);
  agents.Register("a", "i", std::make_shared<FakeAgentChannel>());
  agents.Register("b", "i", std::make_shared<FakeAgentChannel>());
  EXPECT_EQ(agents.TakeAll().size(), 2u);
  EXPECT_FALSE(agents.Connected("a"));
  EXPECT_TRUE(agents.TakeAll().empty());
}

}  // namespace
}  // namespace gpusched::server
