// CommitPipeline: the books of the control plane's group commits (issue 40).

#include "server/commit_pipeline.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "store/record_codec.h"

namespace gpusched::server {
namespace {

using PendingWrite = CommitPipeline::PendingWrite;
using store::CommitCost;

// Moves staged writes into a commit while they fit its budget (issue 38): first the small
// records, then tasks outside submissions, then whole submissions in the order staged (the
// first that does not fit stops them), then keys of no staged submission.
class Taker {
 public:
  Taker(const CommitPipeline::Budget& budget, PendingWrite& from, PendingWrite& to)
      : b_(budget), from_(from), to_(to) {}

  void All() {
    Small();
    Take(from_.tasks, to_.tasks, [&](TaskId id) {
      return InSubmission(id) ? Skip() : std::optional<CommitCost>(Task(id));
    });
    Submissions();
    Take(from_.keys, to_.keys, [&](const auto& k) {
      return InSubmission(TaskId(k.second)) ? Skip() : std::optional<CommitCost>(Key(k.first));
    });
  }

  // Then up to `max` demotions, in id order (issue 43).
  void Demotions(size_t max) {
    size_t taken = 0;
    for (auto it = from_.demotions.begin();
         it != from_.demotions.end() && taken < max && !Full();) {
      if (Fits(Task(*it))) {
        to_.demotions.insert(from_.demotions.extract(it++));
        ++taken;
      } else {
        ++it;
      }
    }
  }

 private:
  // Moves each element of `from` whose cost fits into `to`.
  template <typename C, typename Cost>
  void Take(C& from, C& to, Cost cost) {
    for (auto it = from.begin(); it != from.end() && !Full();) {
      if (Fits(cost(*it))) {
        to.insert(from.extract(it++));
      } else {
        ++it;
      }
    }
  }
  // Whether `c` fits beside what was taken (anything fits an empty commit); counts it if so.
  // None: not to be taken here.
  bool Fits(const std::optional<CommitCost>& c) {
    if (!c) return false;
    CommitCost sum = taken_;
    sum += *c;
    if (any_ && !sum.Within(b_.limits)) return false;
    taken_ = sum;
    any_ = true;
    return true;
  }
  static std::optional<CommitCost> Skip() { return std::nullopt; }
  // No operation fits any more: the rest need not be looked at.
  bool Full() const { return any_ && taken_.ops >= b_.limits.max_ops; }
  CommitCost Task(TaskId id) const { return b_.task ? b_.task(id) : CommitCost{}; }
  CommitCost Key(const std::string& key) const {
    CommitCost c;
    c.Put(key.size(), 20, b_.limits);  // the task id
    return c;
  }
  bool InSubmission(TaskId id) const {
    auto u = from_.submissions.upper_bound(id);
    if (u == from_.submissions.begin()) return false;
    --u;
    return id.value() < u->first.value() + u->second;
  }
  void Small();
  void Submissions();

  const CommitPipeline::Budget& b_;
  PendingWrite& from_;
  PendingWrite& to_;
  CommitCost taken_;
  bool any_ = false;
};

void Taker::Small() {
  const store::CommitLimits& l = b_.limits;
  Take(from_.nodes, to_.nodes, [&](const auto& n) {
    CommitCost c;
    c.Put(n.first.size(), store::EncodeNode(n.second).size(), l);
    return c;
  });
  Take(from_.removed_nodes, to_.removed_nodes, [&](const std::string& name) {
    CommitCost c;
    c.Delete(name.size(), l);
    c.Delete(name.size(), l);  // its parts
    return c;
  });
  Take(from_.peaks, to_.peaks,
       [&](const core::MemoryProfile& p) { return b_.peak ? b_.peak(p) : CommitCost{}; });
  Take(from_.tokens, to_.tokens, [&](const auto& t) {
    CommitCost c;
    if (t.second) {
      c.Put(t.first.size(), store::EncodeToken(*t.second).size(), l);
    } else {
      c.Delete(t.first.size(), l);
    }
    return c;
  });
  Take(from_.quotas, to_.quotas, [&](const auto& q) {
    CommitCost c;
    if (q.second) {
      c.Put(q.first.size(), 6 * q.first.size() + 256, l);
    } else {
      c.Delete(q.first.size(), l);
    }
    return c;
  });
}

void Taker::Submissions() {
  std::multimap<uint64_t, std::string> keys_of;  // task id -> the keys naming it
  for (const auto& [key, id] : from_.keys) keys_of.emplace(id, key);
  while (!from_.submissions.empty() && !Full()) {
    const auto [first, count] = *from_.submissions.begin();
    const uint64_t end = first.value() + count;
    CommitCost c;
    for (uint64_t id = first.value(); id < end; ++id) c += Task(TaskId(id));
    const auto keys_begin = keys_of.lower_bound(first.value());
    const auto keys_end = keys_of.lower_bound(end);
    for (auto k = keys_begin; k != keys_end; ++k) c += Key(k->second);
    if (!Fits(c)) return;
    for (uint64_t id = first.value(); id < end; ++id) {
      from_.tasks.erase(TaskId(id));
      to_.tasks.insert(TaskId(id));
    }
    for (auto k = keys_begin; k != keys_end; ++k) to_.keys.insert(from_.keys.extract(k->second));
    to_.submissions.insert(from_.submissions.extract(first));
  }
}

}  // namespace

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

CommitPipeline::Started CommitPipeline::Begin(const Budget& budget) {
  committing_ = true;
  Started started;
  started.seq = next_commit_++;
  Taker taker(budget, pending_, started.write);
  taker.All();
  started.complete = pending_.settled();  // demotions are not waited for
  taker.Demotions(kDemotionsPerCommit);
  in_flight_complete_ = started.complete;
  if (!started.complete && left_since_ == 0) left_since_ = started.seq;
  in_flight_ = started.write.tasks;
  return started;
}

void CommitPipeline::Committed(uint64_t seq) {
  committing_ = false;
  in_flight_.clear();
  if (in_flight_complete_) {  // everything staged for it, and before it, is stored
    durable_ = std::max(durable_, seq);
    left_since_ = 0;
  } else {
    durable_ = std::max(durable_, left_since_ - 1);
  }
  consecutive_failures_ = 0;
}

DurationMs CommitPipeline::Failed(uint64_t seq, const Status& s, PendingWrite w) {
  committing_ = false;
  in_flight_.clear();
  ++consecutive_failures_;
  last_failed_ = seq;
  last_failure_ = s;
  if (left_since_ == 0 || seq < left_since_) left_since_ = seq;  // its writes go back
  const DurationMs backoff = std::min<DurationMs>(
      retry_max_ms_, kFirstRetryMs << std::min(consecutive_failures_ - 1, 16));
  next_retry_ms_ = clock_.MonoMs() + backoff;
  pending_.tasks.insert(w.tasks.begin(), w.tasks.end());
  for (TaskId id : w.demotions) {  // unless changed since in more than its Pt
    if (pending_.tasks.count(id) == 0) pending_.demotions.insert(id);
  }
  for (auto& [name, n] : w.nodes) pending_.nodes.emplace(name, std::move(n));  // newer wins
  for (const std::string& name : w.removed_nodes) {  // unless registered again since
    if (pending_.nodes.count(name) == 0) pending_.removed_nodes.insert(name);
  }
  pending_.keys.insert(w.keys.begin(), w.keys.end());
  pending_.peaks.insert(w.peaks.begin(), w.peaks.end());
  pending_.tokens.insert(w.tokens.begin(), w.tokens.end());  // newer (already pending) wins
  for (auto& [team, q] : w.quotas) pending_.quotas.emplace(team, std::move(q));  // newer wins
  pending_.submissions.insert(w.submissions.begin(), w.submissions.end());
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
