#pragma once
// ServerLink: the agent's one AgentLink stream to the control plane (issue 40: split out of
// Agent::Impl, which keeps what the messages mean). It connects to the first reachable server
// of a list, sends the registration the agent builds as the stream's first message, hands each
// server message to the agent in order, and on a lost or refused stream reconnects with
// backoff (100 ms doubling to 1 s). A standby's "not leader; leader is ADDR" sends it to ADDR
// (added to the list when new). A server that cannot be reached, or that refuses the agent, is
// said once per server and reason and again each minute while it lasts.
//
// Sending: any thread, never waiting for the network. Messages are queued on the live stream
// under the send lock and written one at a time in the order queued; while there is no stream
// they are dropped (the next registration carries what the server must know). SendWith runs
// the caller's code under the same lock, so a message it decides to send is ordered against
// the registration: a registration being written either carries its content or precedes it.
//
// Lock order: the send lock before anything the hooks take (make_register and SendWith's
// `make` run under it); on_message and log run with no lock of the link held.
//
// Thread-safety: Run on one thread (the link thread); Stop, Send and SendWith from any.

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "rpc/channel.h"

namespace gpusched::agent {

class ServerLink {
 public:
  struct Options {
    std::vector<std::string> servers;  // host:port each; at least one
    rpc::ClientTls tls;                // disabled = plaintext
    std::string token;                 // sent as `authorization: Bearer TOKEN`; "" = none
  };
  struct Hooks {
    // The stream's first message, built under the send lock at each (re)connection.
    std::function<v1::AgentMessage()> make_register;
    // Every message the server sends, on the link thread, in order.
    std::function<void(const v1::ServerMessage&)> on_message;
    std::function<void(const std::string&, logging::Level)> log;
  };

  ServerLink(Options options, Hooks hooks, const Clock& clock);
  ~ServerLink();
  ServerLink(const ServerLink&) = delete;
  ServerLink& operator=(const ServerLink&) = delete;

  // The link thread's loop: returns once Stop was called.
  void Run();
  // Ends the stream in flight and makes Run return. Idempotent.
  void Stop();
  // Queues `m` on the live stream; dropped when there is none.
  void Send(v1::AgentMessage m);
  // Runs `make` under the send lock and queues what it returns, if anything.
  void SendWith(const std::function<std::optional<v1::AgentMessage>()>& make);

 private:
  struct Stream;
  struct StreamEnd {
    grpc::Status status;
    bool connected = false;  // the registration, at least, was written
  };
  // One stream to `server`, from its registration to its final status.
  StreamEnd RunStream(const std::string& server, DurationMs* backoff);
  // Handles one completion of `conn`'s queue; false once the stream is over and drained.
  bool OnCompletion(Stream& conn, void* tag, bool ok, const std::string& server,
                    DurationMs* backoff);
  // After a stream ended: follows a leader hint (true: connect again at once) or moves on to
  // the next server, saying why where that helps.
  bool FollowLeader(const std::string& server, const grpc::Status& status);
  void SayWhy(const std::string& server, const StreamEnd& end);
  void SendLocked(v1::AgentMessage m);  // REQUIRES: send_mu_ held

  Options options_;
  Hooks hooks_;
  const Clock& clock_;
  size_t current_ = 0;  // link thread only: the server connected to next
  std::map<std::string, std::unique_ptr<v1::AgentLink::Stub>> stubs_;  // link thread only
  // Link thread only: what was said of each unreachable or refusing server, and when.
  std::map<std::string, std::pair<std::string, TimeMs>> unreachable_said_;

  std::mutex mu_;  // guards stop_ and ctx_
  std::condition_variable cv_;
  bool stop_ = false;
  grpc::ClientContext* ctx_ = nullptr;  // the stream in flight, for Stop

  std::mutex send_mu_;
  Stream* stream_ = nullptr;  // send_mu_: the stream messages go to; none while down
};

}  // namespace gpusched::agent
