#pragma once
// Issue 40: the agent stream's conversions, in one place: the gpusched.v1 messages an agent
// sends to the structs ControlPlane reads (agent_messages.h), and back (tests, recordings).
// Bad values are refused here, naming the field and the value; rpc/convert.h holds the
// core <-> protobuf conversions these build on.

#include "base/status.h"
#include "gpusched/v1/gpusched.pb.h"
#include "server/agent_messages.h"

namespace gpusched::server {

namespace v1 = ::gpusched::v1;

// The node spec is rpc::NodeSpecFromProto's (its errors name register.*).
StatusOr<AgentRegistration> RegistrationFromProto(const v1::RegisterNode& p);
// Every value is accepted: an unknown kind is an end, an unknown peak source is kUnknown.
TaskReport TaskReportFromProto(const v1::TaskStatus& p);
// A task heartbeat's utilisation is clamped to 0..100 and its memory to >= 0; an unknown
// executor status is kUnreported (older agents). A registration (only the first one
// counts) and an empty message are std::monostate.
AgentReport AgentReportFromProto(const v1::AgentMessage& m);

v1::TaskStatus TaskReportToProto(const TaskReport& r);
// What the control plane sends, on the wire (its strings are moved, not copied).
v1::ServerMessage AgentOrderToProto(AgentOrder&& order);
v1::RegisterNode RegistrationToProto(const AgentRegistration& r);

}  // namespace gpusched::server
