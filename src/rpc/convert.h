#pragma once
// Conversions between gpusched.v1 protobuf messages and core types. The only place that
// knows both; core never sees protobuf. Conversions from the wire validate what core would
// not (enum strings, list shapes) and name the field in errors.

#include <string>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "core/cluster_state.h"
#include "core/scheduler.h"
#include "core/task.h"
#include "gpusched/v1/gpusched.pb.h"

namespace gpusched::rpc {

namespace v1 = ::gpusched::v1;

StatusOr<core::TaskSpec> TaskSpecFromProto(const v1::TaskSpec& p);
void TaskSpecToProto(const core::TaskSpec& s, v1::TaskSpec* p);

// `last`: where the task ran last (core drops the placement when a task ends; the server keeps
// it so `ls` can still name the node and GPUs of a finished task); may be null.
// `with_history` adds the state transitions (show, not ls).
void TaskToProto(const core::Task& t, const core::Placement* last, bool with_history,
                 v1::Task* p);

// Registration checks labels and taints as `gpusched agent` does (core/node_rules.h).
StatusOr<core::NodeSpec> NodeSpecFromProto(const v1::RegisterNode& p);
void TaintsToProto(const std::vector<core::Taint>& taints,
                   google::protobuf::RepeatedPtrField<v1::Taint>* out);
void NodeSpecToProto(const core::NodeSpec& s, v1::RegisterNode* p);
// `gpu_models`: the model name of n.gpus[i] (core::ClusterState::ModelName).
void NodeToProto(const core::NodeState& n, const std::vector<std::string>& gpu_models,
                 bool connected, v1::Node* p);

void ExplanationToProto(const core::Explanation& e, v1::WhyResponse* p);

// A SubmitRequest's job array: 0 <= first <= last <= 1,000,000,000 (as `submit --array`) and
// at most core::kMaxArrayTasks indices; else InvalidArgument naming `array` and the values
// (issue 40: {0, INT64_MAX} overflowed the count and passed).
StatusOr<IndexRange> IndexRangeFromProto(const v1::IndexRange& p);

// "pending", ... -> TaskState; InvalidArgument naming `field` for anything else.
StatusOr<core::TaskState> TaskStateFromName(const std::string& name, const std::string& field);

}  // namespace gpusched::rpc
