#include "server/api_convert.h"

#include "rpc/convert.h"

namespace gpusched::server {

v1::Task TaskToProto(const TaskView& v, bool with_history) {
  v1::Task p;
  rpc::TaskToProto(v.task, v.last_placement ? &*v.last_placement : nullptr, with_history, &p);
  if (v.stored_state) {
    p.set_unstored_state(p.state());  // issue 40: a restart now would find the stored one
    p.set_state(core::TaskStateName(*v.stored_state));
  }
  if (p.gang_nodes_size() == 0) {  // a gang that no longer holds its nodes: the last ones
    for (const std::string& n : v.last_gang) p.add_gang_nodes(n);
  }
  return p;
}

v1::Node NodeToProto(const NodeView& v) {
  v1::Node p;
  rpc::NodeToProto(v.node, v.gpu_models, v.connected, &p);
  return p;
}

v1::WhyResponse WhyToProto(const core::Explanation& e) {
  v1::WhyResponse p;
  rpc::ExplanationToProto(e, &p);
  return p;
}

v1::TeamQuota QuotaToProto(const core::TeamQuota& q) {
  v1::TeamQuota p;
  p.set_team(q.team);
  p.set_guaranteed_gpus(q.guaranteed_gpus);
  p.set_guaranteed_gpu_mem_mib(q.guaranteed_gpu_mem_mib);
  p.set_borrow_gpus(q.borrow_gpus);
  p.set_max_priority(q.max_priority);
  return p;
}

v1::ListQuotasResponse QuotasToProto(const std::vector<TeamQuotaView>& teams) {
  v1::ListQuotasResponse out;
  for (const TeamQuotaView& v : teams) {
    const core::TeamStatus& s = v.status;
    v1::TeamQuotaStatus* t = out.add_teams();
    *t->mutable_quota() = QuotaToProto(s.quota);
    t->mutable_quota()->set_team(v.team);
    t->set_quota_set(s.has_quota);
    t->set_used_gpus(s.used.gpus);
    t->set_used_gpu_mem_mib(s.used.gpu_mem_mib);
    t->set_borrowed_gpus(s.borrowed_gpus);
    t->set_pending(s.pending);
    t->set_running(s.used.tasks);
    if (v.granted_priority) t->set_granted_priority(*v.granted_priority);
  }
  return out;
}

v1::LearnedProfile LearnedProfileToProto(const LearnedProfileView& v) {
  v1::LearnedProfile out;
  out.set_key(v.key);
  out.set_task_type(v.profile.task_type);
  out.set_model(v.profile.model);
  out.set_batch(v.profile.batch);
  out.set_height(v.profile.height);
  out.set_width(v.profile.width);
  for (MiB m : v.learned.recent) out.add_recent_peaks_mib(m);
  out.set_observations(v.learned.observations);
  if (v.estimate_mib) out.set_estimate_mib(*v.estimate_mib);
  return out;
}

}  // namespace gpusched::server
