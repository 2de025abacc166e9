#include "rpc/convert.h"

#include <algorithm>

#include "core/filters.h"
#include "core/node_rules.h"
#include "core/topology.h"
#include "rpc/tls.h"

namespace gpusched::rpc {

StatusOr<core::TaskState> TaskStateFromName(const std::string& name, const std::string& field) {
  for (core::TaskState s : {core::TaskState::kPending, core::TaskState::kPreempted,
                            core::TaskState::kAssigned, core::TaskState::kRunning,
                            core::TaskState::kSucceeded,
                            core::TaskState::kFailed, core::TaskState::kCancelled}) {
    if (name == core::TaskStateName(s)) return s;
  }
  return InvalidArgument(field + ": unknown state \"" + name +
                         "\" (use pending, preempted, assigned, running, succeeded, failed or "
                         "cancelled)");
}

StatusOr<IndexRange> IndexRangeFromProto(const v1::IndexRange& p) {
  constexpr int64_t kMaxIndex = 1'000'000'000;  // ParseIndexRange's, for `submit --array`
  const std::string range = std::to_string(p.first()) + "-" + std::to_string(p.last());
  if (p.first() < 0 || p.last() < p.first() || p.last() > kMaxIndex) {
    return InvalidArgument("array: " + range + " is not an index range A-B with 0 <= A <= B <= " +
                           std::to_string(kMaxIndex));
  }
  if (p.last() - p.first() >= core::kMaxArrayTasks) {  // no overflow: 0 <= first <= last
    return InvalidArgument("array: " + range + " has " +
                           std::to_string(p.last() - p.first() + 1) + " indices; at most " +
                           std::to_string(core::kMaxArrayTasks) + " in one array");
  }
  return IndexRange{p.first(), p.last()};
}

// What the task runs: its working directory, command and environment, none with a NUL byte
// (they become C strings on the node).
static Status ProcessFromProto(const v1::TaskSpec& p, core::TaskSpec& s) {
  if (p.workdir().find('\0') != std::string::npos) {
    return InvalidArgument("workdir: contains a NUL byte");
  }
  if (!p.workdir().empty() && p.workdir()[0] != '/') {
    return InvalidArgument("workdir: \"" + p.workdir() + "\" is not an absolute path");
  }
  s.workdir = p.workdir();
  if (p.command_size() == 0) return InvalidArgument("command: must not be empty");
  for (int i = 0; i < p.command_size(); ++i) {
    if (p.command(i).find('\0') != std::string::npos) {
      return InvalidArgument("command[" + std::to_string(i) + "]: contains a NUL byte");
    }
    s.command.push_back(p.command(i));
  }
  if (p.command(0).empty()) return InvalidArgument("command[0]: must not be empty");
  for (const auto& [k, v] : p.env()) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos ||
        v.find('\0') != std::string::npos) {
      return InvalidArgument("env: invalid variable name \"" + k + "\"");
    }
    s.env[k] = v;
  }
  return Status::Ok();
}

StatusOr<core::TaskSpec> TaskSpecFromProto(const v1::TaskSpec& p) {
  core::TaskSpec s;
  s.name = p.name();
  s.gpus = p.gpus();
  s.gpu_mem_mib = p.gpu_mem_mib();
  s.resources.cpu_milli = p.cpu_milli();
  s.resources.mem_mib = p.mem_mib();
  if (p.has_duration_ms()) s.duration_ms = p.duration_ms();
  if (p.has_max_retries()) s.max_retries = p.max_retries();
  if (p.has_time_limit_ms()) s.time_limit_ms = p.time_limit_ms();
  if (p.has_heartbeat_timeout_ms()) s.heartbeat_timeout_ms = p.heartbeat_timeout_ms();
  GS_RETURN_IF_ERROR(ProcessFromProto(p, s));
  s.user = p.user();
  s.team = p.team();
  s.gpu_model = p.gpu_model();
  for (const auto& [k, v] : p.node_selector()) s.node_selector[k] = v;
  for (int i = 0; i < p.tolerations_size(); ++i) {
    const v1::Toleration& t = p.tolerations(i);
    core::Toleration out{t.key(), t.value(), t.exists(), !t.effect().empty(),
                         core::TaintEffect::kNoSchedule};
    if (out.has_effect) {
      const std::string field = "tolerations[" + std::to_string(i) + "]";
      GS_ASSIGN_OR_RETURN(out.effect, core::ParseTaintEffect(t.effect(), field));
    }
    s.tolerations.push_back(out);
  }
  s.keep_pending_if_infeasible = p.keep_pending();
  if (p.has_profile()) {
    const v1::MemoryProfile& m = p.profile();
    s.profile = core::MemoryProfile{m.task_type(), m.model(), m.batch(), m.height(), m.width()};
  }
  s.nodes = p.nodes() == 0 ? 1 : p.nodes();  // the core names an out-of-range value
  s.tasks_per_node = p.tasks_per_node() == 0 ? 1 : p.tasks_per_node();
  if (p.has_gang_timeout_ms()) s.gang_timeout_ms = p.gang_timeout_ms();
  s.priority_class = p.priority_class();
  s.preemptible = !p.has_preemptible() || p.preemptible();
  if (p.has_grace_ms()) s.grace_ms = p.grace_ms();
  if (p.has_stop_signal()) s.stop_signal = p.stop_signal();  // the core checks the value
  return s;
}

void TaskSpecToProto(const core::TaskSpec& s, v1::TaskSpec* p) {
  p->set_name(s.name);
  p->set_gpus(s.gpus);
  p->set_gpu_mem_mib(s.gpu_mem_mib);
  p->set_cpu_milli(s.resources.cpu_milli);
  p->set_mem_mib(s.resources.mem_mib);
  if (s.duration_ms) p->set_duration_ms(*s.duration_ms);
  if (s.max_retries) p->set_max_retries(*s.max_retries);
  if (s.time_limit_ms) p->set_time_limit_ms(*s.time_limit_ms);
  if (s.heartbeat_timeout_ms) p->set_heartbeat_timeout_ms(*s.heartbeat_timeout_ms);
  p->set_workdir(s.workdir);
  p->set_user(s.user);
  p->set_team(s.team);
  for (const std::string& c : s.command) p->add_command(c);
  for (const auto& [k, v] : s.env) (*p->mutable_env())[k] = v;
  p->set_gpu_model(s.gpu_model);
  for (const auto& [k, v] : s.node_selector) (*p->mutable_node_selector())[k] = v;
  for (const core::Toleration& t : s.tolerations) {
    v1::Toleration* o = p->add_tolerations();
    o->set_key(t.key);
    o->set_value(t.value);
    o->set_exists(t.exists);
    if (t.has_effect) o->set_effect(core::TaintEffectName(t.effect));
  }
  p->set_keep_pending(s.keep_pending_if_infeasible);
  if (s.profile) {
    v1::MemoryProfile* m = p->mutable_profile();
    m->set_task_type(s.profile->task_type);
    m->set_model(s.profile->model);
    m->set_batch(s.profile->batch);
    m->set_height(s.profile->height);
    m->set_width(s.profile->width);
  }
  if (s.nodes != 1) p->set_nodes(s.nodes);  // 0 on the wire = 1
  if (s.tasks_per_node != 1) p->set_tasks_per_node(s.tasks_per_node);
  if (s.gang_timeout_ms) p->set_gang_timeout_ms(*s.gang_timeout_ms);
  p->set_priority_class(s.priority_class);
  if (!s.preemptible) p->set_preemptible(false);
  if (s.grace_ms) p->set_grace_ms(*s.grace_ms);
  if (s.stop_signal) p->set_stop_signal(*s.stop_signal);
}

namespace {

// Where it runs, or ran last: node, GPUs, shares, topology rule, and a gang's nodes.
void PlacementToProto(const core::Task& t, const core::Placement* last, v1::Task* p) {
  const core::Placement* where = t.placement ? &*t.placement : last;
  if (where != nullptr) {
    p->set_node(where->node);
    for (int g : where->gpus) p->add_gpus(g);
    for (MiB m : where->gpu_mem_mib) p->add_gpu_mem_mib(m);
    p->set_topology_rule(where->topology_rule);
  }
  if (!t.placement) return;
  for (const core::Placement& g : t.gang_placements) {
    if (p->gang_nodes_size() == 0) p->add_gang_nodes(t.placement->node);
    p->add_gang_nodes(g.node);
  }
}

// A running task's heartbeats: its GPU use (CN109992422A claim 7), its executor's status
// (claims 7-8), and when its current attempt started.
void RunToProto(const core::Task& t, v1::Task* p) {
  if (t.state == core::TaskState::kRunning && t.gpu_util >= 0) {
    p->set_gpu_util(t.gpu_util);
    p->set_gpu_mem_used_mib(t.gpu_mem_used_mib);
    if (t.gpu_util == 0) p->set_idle_since_ms(t.busy_ms);  // at 0 % since then
    p->set_idle(t.idle);
  }
  if (t.state == core::TaskState::kRunning) {
    p->set_executor_status(core::ExecutorStatusName(t.executor_status));
    p->set_executor_detail(t.executor_detail);
    p->set_last_heartbeat_ms(t.last_heartbeat_ms);
  }
  for (auto it = t.history.rbegin(); it != t.history.rend(); ++it) {
    // The current attempt only: a task requeued (retried, evicted, preempted) has not
    // started again yet, so its elapsed time does not grow while it waits.
    if (it->state == core::TaskState::kAssigned || it->state == core::TaskState::kPending ||
        it->state == core::TaskState::kPreempted) {
      break;
    }
    if (it->state == core::TaskState::kRunning) {
      p->set_started_ms(it->at_ms);
      break;
    }
  }
}

}  // namespace

void TaskToProto(const core::Task& t, const core::Placement* last, bool with_history,
                 v1::Task* p) {
  p->set_id(t.id.value());
  p->set_name(t.spec.name);
  p->set_state(core::TaskStateName(t.state));
  PlacementToProto(t, last, p);
  if (t.exit_code) p->set_exit_code(*t.exit_code);
  p->set_attempts(t.attempts);
  p->set_fail_cnt(t.fail_cnt);
  p->set_placement_failures(t.placement_failures);
  p->set_reason(t.reason);
  p->set_st(t.st);
  p->set_pt(t.pt);
  p->set_gpu_mem_need_mib(t.gpu_mem_need_mib);
  p->set_mem_source(t.mem_source);
  p->set_submitted_ms(t.submitted_ms);
  p->set_assigned_ms(t.assigned_ms);
  p->set_finished_ms(t.finished_ms);
  RunToProto(t, p);
  for (int r : t.ranks_done) p->add_ranks_done(r);
  p->set_priority(t.priority);
  p->set_preempted_by(t.preempted_by.valid() ? t.preempted_by.value() : 0);
  p->set_preemptions(t.preemptions);
  p->set_checkpoints(t.checkpoints);
  p->set_checkpointed_attempt(t.checkpointed_attempt);
  p->set_failure(core::FailureName(t.failure));
  if (const std::optional<core::ArrayMember>& a = t.spec.array) {  // consecutive ids (task.h)
    v1::ArrayMembership* m = p->mutable_array();
    m->set_id(t.id.value() - static_cast<uint64_t>(a->index - a->first));
    m->set_index(a->index);
    m->set_first(a->first);
    m->set_last(a->last);
  }
  TaskSpecToProto(t.spec, p->mutable_spec());
  if (!with_history) return;
  for (const core::Transition& h : t.history) {
    v1::Transition* o = p->add_history();
    o->set_at_ms(h.at_ms);
    o->set_state(core::TaskStateName(h.state));
    o->set_reason(h.reason);
  }
}

StatusOr<core::NodeSpec> NodeSpecFromProto(const v1::RegisterNode& p) {
  core::NodeSpec s;
  GS_RETURN_IF_ERROR(CheckNodeName(p.name(), "register.name"));  // the agent's own rule
  s.name = p.name();
  s.address = p.address();
  s.capacity = {p.cpu_milli(), p.mem_mib()};
  for (int i = 0; i < p.gpus_size(); ++i) {
    const v1::Gpu& g = p.gpus(i);
    if (g.total_mib() <= 0) {
      return InvalidArgument("register.gpus[" + std::to_string(i) + "].total_mib: must be > 0, got " +
                             std::to_string(g.total_mib()));
    }
    s.gpus.push_back({g.model(), g.total_mib()});
  }
  for (const auto& [k, v] : p.labels()) s.labels[k] = v;
  for (const auto& [k, v] : s.labels) {  // in key order: the same error for the same labels
    GS_RETURN_IF_ERROR(core::ValidateLabel(k, v, "register.labels", k + "=" + v));
  }
  for (int i = 0; i < p.taints_size(); ++i) {
    const v1::Taint& t = p.taints(i);
    const std::string field = "register.taints[" + std::to_string(i) + "]";
    core::Taint out{t.key(), t.value(), core::TaintEffect::kNoSchedule};
    GS_RETURN_IF_ERROR(core::ValidateLabel(t.key(), t.value(), field, t.key() + "=" + t.value()));
    GS_ASSIGN_OR_RETURN(out.effect, core::ParseTaintEffect(t.effect(), field + ".effect"));
    s.taints.push_back(std::move(out));
  }
  if (p.gpu_links_size() > 0 || p.gpu_numa_size() > 0) {
    s.topology.gpus = p.gpus_size();
    for (uint32_t l : p.gpu_links()) s.topology.links.push_back(static_cast<uint8_t>(std::min(l, 255u)));
    s.topology.numa.assign(p.gpu_numa().begin(), p.gpu_numa().end());
    if (s.topology.links.empty()) {
      return InvalidArgument("register.gpu_links: empty while gpu_numa is set");
    }
    if (Status v = core::ValidateTopology(s.topology); !v.ok()) {
      return InvalidArgument("register." + v.message());
    }
  }
  return s;
}

void TaintsToProto(const std::vector<core::Taint>& taints,
                   google::protobuf::RepeatedPtrField<v1::Taint>* out) {
  for (const core::Taint& t : taints) {
    v1::Taint* o = out->Add();
    o->set_key(t.key);
    o->set_value(t.value);
    o->set_effect(core::TaintEffectName(t.effect));
  }
}

void NodeSpecToProto(const core::NodeSpec& s, v1::RegisterNode* p) {
  p->set_name(s.name);
  p->set_address(s.address);
  p->set_cpu_milli(s.capacity.cpu_milli);
  p->set_mem_mib(s.capacity.mem_mib);
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    v1::Gpu* g = p->add_gpus();
    g->set_index(static_cast<int32_t>(i));
    g->set_model(s.gpus[i].model);
    g->set_total_mib(s.gpus[i].total_mib);
  }
  for (const auto& [k, v] : s.labels) (*p->mutable_labels())[k] = v;
  TaintsToProto(s.taints, p->mutable_taints());
  for (uint8_t l : s.topology.links) p->add_gpu_links(l);
  for (int numa : s.topology.numa) p->add_gpu_numa(numa);
}

void NodeToProto(const core::NodeState& n, const std::vector<std::string>& gpu_models,
                 bool connected, v1::Node* p) {
  p->set_name(n.name);
  p->set_address(n.address);
  p->set_reachable(n.reachable);
  p->set_available(n.available);
  p->set_cordoned(n.cordoned);
  p->set_draining(n.draining);
  p->set_connected(connected);
  p->set_cpu_milli(n.capacity.cpu_milli);
  p->set_mem_mib(n.capacity.mem_mib);
  p->set_cpu_allocated_milli(n.allocated.cpu_milli);
  p->set_mem_allocated_mib(n.allocated.mem_mib);
  p->set_running_tasks(n.running_tasks);
  p->set_last_heartbeat_ms(n.last_heartbeat_ms);
  p->set_lost(n.lost);
  for (size_t i = 0; i < n.gpus.size(); ++i) {
    const core::GpuState& g = n.gpus[i];
    v1::Gpu* o = p->add_gpus();
    o->set_index(g.index);
    o->set_model(i < gpu_models.size() ? gpu_models[i] : "");
    o->set_total_mib(g.total_mib);
    o->set_allocated_mib(g.allocated_mib);
    o->set_reported_free_mib(g.reported_free_mib);
    o->set_tasks(g.tasks);
    o->set_unhealthy(!g.healthy);
    o->set_last_error(g.last_error);
    const size_t gi = static_cast<size_t>(g.index);
    o->set_numa_node(gi < n.topology.numa.size() ? n.topology.numa[gi] : -1);
  }
  for (const auto& [k, v] : n.labels) (*p->mutable_labels())[k] = v;
  TaintsToProto(n.taints, p->mutable_taints());
}

void ExplanationToProto(const core::Explanation& e, v1::WhyResponse* p) {
  p->set_id(e.id.value());
  p->set_state(core::TaskStateName(e.state));
  p->set_claim_status(static_cast<int32_t>(e.claim));
  p->set_st(e.st);
  p->set_pt(e.pt);
  p->set_fail_cnt(e.fail_cnt);
  p->set_placement_failures(e.placement_failures);
  p->set_attempts(e.attempts);
  p->set_queue(e.queue);
  p->set_summary(e.summary);
  p->set_need(e.need);
  p->set_pass(e.pass);
  p->set_pass_age_ms(e.pass_age_ms);
  p->set_waits_for(e.waits_for);
  const core::PlacementReport& r = e.last_report;
  p->set_total_nodes(r.total_nodes);
  p->set_feasible_nodes(r.feasible_nodes);
  p->set_examined_nodes(r.examined_nodes);
  for (int f = 0; f < core::kNumFilters; ++f) {
    if (r.rejected[static_cast<size_t>(f)] > 0) {
      (*p->mutable_rejected())[core::FilterName(f)] = r.rejected[static_cast<size_t>(f)];
    }
  }
  p->set_chosen_node(r.chosen_node);
  p->set_score(r.score);
  p->set_topology_rule(r.topology_rule);
  for (const core::ScorePart& s : r.breakdown) {
    v1::ScorePart* o = p->add_breakdown();
    o->set_name(s.name);
    o->set_value(s.value);
    o->set_weight(s.weight);
  }
}

}  // namespace gpusched::rpc
