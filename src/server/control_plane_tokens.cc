// ControlPlane: who calls (bearer tokens) and the tokens themselves, persisted through the
// commit pipeline like every other record (store::TokenRecord: the secret's hash only).

#include "server/control_plane.h"

namespace gpusched::server {

StatusOr<Caller> ControlPlane::Authenticate(const std::string& authorization,
                                            const std::string& local_user) {
  if (!auth_enabled()) {
    // A proven account whose name no token could carry runs as the unprivileged default.
    const bool usable = !local_user.empty() && CheckPrincipalName(local_user, "user").ok();
    return Caller{usable ? local_user : config_.default_user, "default", true, ""};
  }
  if (authorization.empty()) {
    return Unauthenticated("authentication required: send the header \"authorization: Bearer "
                           "TOKEN\"");
  }
  GS_ASSIGN_OR_RETURN(std::string token, ParseBearer(authorization));
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_.Authenticate(token);
}

Status ControlPlane::AuthenticateAgent(const std::string& authorization,
                                       const std::string& node) {
  if (authorization.empty()) {
    return Unauthenticated(
        "agent \"" + node + "\" presented neither a client certificate nor an agent token, and "
        "this server authenticates agents (--auth token): create a token with `gpusched token "
        "create --agent " + node + "` and start the agent with --token-file FILE (or "
        "GPUSCHED_TOKEN), or use TLS (`gpusched certs init DIR --agent " + node + "`)");
  }
  GS_ASSIGN_OR_RETURN(std::string token, ParseBearer(authorization));
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_.AuthenticateAgent(token, node);
}

StatusOr<MintedToken> ControlPlane::CreateToken(const std::string& user, const std::string& team,
                                                bool admin) {
  GS_ASSIGN_OR_RETURN(MintedToken m, MintToken(user, team, admin, clock_.NowMs()));
  return StoreToken(std::move(m));
}

StatusOr<MintedToken> ControlPlane::CreateAgentToken(const std::string& node) {
  GS_ASSIGN_OR_RETURN(MintedToken m, MintAgentToken(node, clock_.NowMs()));
  return StoreToken(std::move(m));
}

StatusOr<MintedToken> ControlPlane::StoreToken(MintedToken m) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::string id = m.record.id;
  tokens_.Put(m.record);  // nobody knows the secret before this returns
  pipeline_.pending().tokens[id] = m.record;
  const uint64_t seq = StageChanges();
  if (Status s = CommitThrough(lock, seq); !s.ok()) {
    // The failed commit staged the record again: take it out, or a retry would
    // store a token that nobody was given.
    tokens_.Remove(id);
    auto& staged = pipeline_.pending().tokens;
    if (auto it = staged.find(id); it != staged.end() && it->second) staged.erase(it);
    return NotStored("token not stored (" + s.message() + "); nothing was created: try again");
  }
  return m;
}

std::vector<store::TokenRecord> ControlPlane::ListTokens() {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_.List();
}

StatusOr<store::TokenRecord> ControlPlane::RevokeToken(const std::string& id) {
  std::unique_lock<std::mutex> lock(mu_);
  const store::TokenRecord* found = tokens_.Find(id);
  if (found == nullptr) return NotFound("token " + id + ": no such token (see `gpusched token ls`)");
  store::TokenRecord r = *found;
  tokens_.Remove(id);  // refused from now on, stored or not
  pipeline_.pending().tokens[id] = std::nullopt;
  const uint64_t seq = StageChanges();
  if (Status s = CommitThrough(lock, seq); !s.ok()) {
    return NotStored("token " + id + ": revoked on this server, but the revocation is not "
                     "stored yet (" + s.message() + "); the server retries it");
  }
  return r;
}

size_t ControlPlane::TokenCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_.size();
}

}  // namespace gpusched::server
