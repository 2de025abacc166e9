// CommitPipeline: the books of the control plane's group commits (issue 40).

#include "server/commit_pipeline.h"

#include <algorithm>
#include <utility>

namespace gpusched::server {

void CommitPipeline::HoldAction(core::Action a) {
  Outbound o;
  o.commit = next_commit_;
  o.kind = a.kind == core::Action::Kind::kAssign ? Outbound::Kind::kAssign
                                                  : Outbound::Kind::kKill;
  if (o.kind == Outbound::Kind::kAssign) held_assigns_.insert({a.task.value(), a.attempt, a.node});
  o.action = std::move(a);
  held_.push_back(std::move(o));
}

void CommitPipeline::HoldAck(std::weak_ptr<AgentChannel> channel, uint64_t task,
                             int64_t attempt) {
  Outbound ack;
  ack.commit = next_commit_;
  ack.kind = Outbound::Kind::kAck;
  ack.channel = std::move(channel);
  ack.task = task;
  ack.attempt = attempt;
  held_.push_back(std::move(ack));
}

bool CommitPipeline::AssignHeld(uint64_t task, int64_t attempt, const std::string& node) const {
  return held_assigns_.count({task, attempt, node}) > 0;
}

bool CommitPipeline::Unstored(TaskId id) const {
  return pending_.tasks.count(id) > 0 || in_flight_.count(id) > 0;
}

bool CommitPipeline::HasWork() const {
  return !pending_.empty() || (!held_.empty() && held_.front().commit > durable_);
}

bool CommitPipeline::ShouldLead() const {
  const bool backoff = consecutive_failures_ > 0 && clock_.MonoMs() < next_retry_ms_;
  return !committing_ && !backoff && HasWork();
}

CommitPipeline::Started CommitPipeline::Begin() {
  committing_ = true;
  Started started{next_commit_++, std::move(pending_)};
  pending_ = PendingWrite();
  in_flight_ = started.write.tasks;
  return started;
}

void CommitPipeline::Committed(uint64_t seq) {
  committing_ = false;
  in_flight_.clear();
  durable_ = std::max(durable_, seq);
  consecutive_failures_ = 0;
}

DurationMs CommitPipeline::Failed(uint64_t seq, const Status& s, PendingWrite w) {
  committing_ = false;
  in_flight_.clear();
  ++consecutive_failures_;
  last_failed_ = seq;
  last_failure_ = s;
  const DurationMs backoff = std::min<DurationMs>(
      retry_max_ms_, kFirstRetryMs << std::min(consecutive_failures_ - 1, 16));
  next_retry_ms_ = clock_.MonoMs() + backoff;
  pending_.tasks.insert(w.tasks.begin(), w.tasks.end());
  for (auto& [name, n] : w.nodes) pending_.nodes.emplace(name, std::move(n));  // newer wins
  for (const std::string& name : w.removed_nodes) {  // unless registered again since
    if (pending_.nodes.count(name) == 0) pending_.removed_nodes.insert(name);
  }
  pending_.keys.insert(w.keys.begin(), w.keys.end());
  pending_.peaks.insert(w.peaks.begin(), w.peaks.end());
  pending_.tokens.insert(w.tokens.begin(), w.tokens.end());  // newer (already pending) wins
  for (auto& [team, q] : w.quotas) pending_.quotas.emplace(team, std::move(q));  // newer wins
  return backoff;
}

std::vector<CommitPipeline::Outbound> CommitPipeline::TakeReleasable() {
  std::vector<Outbound> out;
  while (!held_.empty() && held_.front().commit <= durable_) {
    Outbound o = std::move(held_.front());
    held_.pop_front();
    if (o.kind == Outbound::Kind::kAssign) {
      held_assigns_.erase({o.action.task.value(), o.action.attempt, o.action.node});
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::optional<Status> CommitPipeline::FailureOf(uint64_t seq) const {
  if (last_failed_ >= seq && seq > durable_) return last_failure_;
  return std::nullopt;
}

std::optional<Status> CommitPipeline::TakeWithdrawn(TaskId id) {
  auto w = withdrawn_.find(id);
  if (w == withdrawn_.end()) return std::nullopt;
  Status why = std::move(w->second);
  withdrawn_.erase(w);
  return why;
}

}  // namespace gpusched::server
