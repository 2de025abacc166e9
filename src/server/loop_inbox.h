#pragma once
// LoopInbox: the inboxes of the control plane's loop (issue 40: split out of ControlPlane).
// Agent handlers post the messages of their streams and their registrations (issue 43: the
// completion queue's thread never waits for the control plane's lock); the gRPC and REST
// doors post submissions (keyed ones apart: the loop reads their keys from the store before
// the round that admits them). The loop takes what was posted, in the order posted, each
// round.
//
// Bounds: at most `max_posted` messages, as many registrations and as many submissions wait.
// A handler that finds the message inbox full waits for the loop to take it (its agent's
// stream is not read meanwhile: gRPC's flow control slows the agent down); a registration or
// a submission that finds its inbox full is refused at once (the agent connects again, the
// client submits again). Once closed (the loop stopped) messages are dropped, registrations
// and submissions refused; Close hands back those not taken, for their posters to answer.
//
// Thread-safety: every method from any thread (its own lock, never held while calling out).

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/task.h"
#include "server/agent_channel.h"
#include "server/agent_messages.h"

namespace gpusched::server {

// What a submission's poster is told: its tasks' ids once durable, or the error.
using SubmitManyDone = std::function<void(StatusOr<std::vector<TaskId>>)>;

struct PostedMessage {
  std::string node;
  AgentReport message;                  // unused when `ended`
  std::weak_ptr<AgentChannel> channel;  // the stream it came on
  bool ended = false;                   // the stream ended, after its last message
};

// Issue 43: an agent's registration, for the loop to admit (many in one round) instead of the
// completion queue's thread waiting for the control plane's lock once per agent. The loop
// calls `admitted` once the node is admitted and before anything is sent on `channel` (the
// call sends the agent its Registered there, so it comes first), then `done` with the outcome;
// both with the control plane's lock held: neither may wait. A registration refused unseen
// (the inbox closed or full) gets `done` alone, from its poster or from Close's taker.
struct PostedRegistration {
  AgentRegistration reg;
  std::shared_ptr<AgentChannel> channel;
  std::function<void()> admitted;
  std::function<void(const Status&)> done;
};

struct PostedSubmission {
  std::vector<core::TaskSpec> specs;  // one, or a job array's
  std::string key;                    // the idempotency key; "" = none
  std::optional<uint64_t> stored;     // the task the store holds for `key`, once read
  SubmitManyDone done;
  // Issue 38: the store holds part of a split submission for `key`: its answer, unless the
  // split is still being stored (then the retry waits for it like the first attempt).
  std::optional<Status> partly = std::nullopt;
};

class LoopInbox {
 public:
  explicit LoopInbox(size_t max_posted) : max_posted_(max_posted) {}

  // Waits for room; false (dropped) once closed. `*wake`: the poster must wake the loop,
  // because the message is `urgent` and nothing urgent was posted since the loop last took
  // the inbox. A message not urgent (issue 43: a routine heartbeat) never wakes the loop: it
  // waits for the next round (an urgent post's, or the loop's tick), with every other one
  // posted meanwhile.
  bool PostMessage(PostedMessage m, bool* wake, bool urgent = true);
  // Never waits. "" when posted (`s` moved in), else why not ("stopping", "busy: ...") with
  // `s` left as it was, for its poster to answer. Submissions are urgent.
  std::string PostSubmission(PostedSubmission&& s, bool* wake);
  // Never waits, like PostSubmission; registrations are urgent.
  std::string PostRegistration(PostedRegistration&& r, bool* wake);
  // The keyed submissions posted so far.
  std::vector<PostedSubmission> TakeKeyed();
  // The messages, the registrations and the unkeyed submissions posted so far, all at once: a
  // post that then finds the inbox empty wakes the loop for what follows.
  struct Taken {
    std::vector<PostedMessage> messages;
    std::vector<PostedRegistration> registrations;
    std::vector<PostedSubmission> submissions;
  };
  Taken Take();
  // Refuses every post from now on; returns the registrations and the submissions not taken
  // (unkeyed submissions first).
  struct Closed {
    std::vector<PostedRegistration> registrations;
    std::vector<PostedSubmission> submissions;
  };
  Closed Close();

 private:
  const size_t max_posted_;
  std::mutex mu_;
  std::condition_variable room_;  // the messages were taken, or the inbox closed
  std::vector<PostedMessage> messages_;
  std::vector<PostedRegistration> registrations_;
  std::vector<PostedSubmission> submissions_, keyed_;
  bool closed_ = false;
  bool woken_ = false;  // an urgent post woke the loop since it last took the inbox
};

}  // namespace gpusched::server
