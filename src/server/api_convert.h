#pragma once
// Issue 40: the doors' conversions (ApiService, the REST API): ControlPlane's views
// (views.h) to the gpusched.v1 messages clients read. The control plane itself speaks core
// types; rpc/convert.h holds the core <-> protobuf conversions these build on.

#include "gpusched/v1/gpusched.pb.h"
#include "server/views.h"

namespace gpusched::server {

namespace v1 = ::gpusched::v1;

// `with_history` adds the state transitions (show, not ls). A view with a stored state shows
// it as `state` and its newer one as `unstored_state`.
v1::Task TaskToProto(const TaskView& v, bool with_history = false);
v1::Node NodeToProto(const NodeView& v);
v1::WhyResponse WhyToProto(const core::Explanation& e);
v1::TeamQuota QuotaToProto(const core::TeamQuota& q);
v1::ListQuotasResponse QuotasToProto(const std::vector<TeamQuotaView>& teams);
v1::LearnedProfile LearnedProfileToProto(const LearnedProfileView& v);

}  // namespace gpusched::server
