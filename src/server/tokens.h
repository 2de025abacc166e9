#pragma once
// Bearer tokens of the API: gRPC metadata `authorization: Bearer TOKEN`, HTTP
// `Authorization: Bearer TOKEN` (DESIGN.md "Trust").
//
// Format: "gst_<id>_<secret>". <id> is 16 lower-case hex digits (8 random bytes), the public
// handle `token ls` shows and `token revoke` takes; <secret> is 64 lower-case hex digits (32
// bytes from OpenSSL's RAND_bytes). The server keeps the id, whom it names and SHA-256 of
// the secret (store::TokenRecord), never the secret: it finds a token by id, then compares
// the hash of the presented secret with the stored one in constant time (CRYPTO_memcmp).
// Every refusal says the same ("unknown, revoked or wrong"), so a caller cannot tell an
// unknown id from a wrong secret.
//
// The parsers are fuzzed (fuzz/auth_token_fuzzer.cc): any input gives a value or a Status.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/state_store.h"

namespace gpusched::server {

// Who is calling, once authenticated. With authentication off everyone is an admin (as
// before tokens existed); `user` is then what the client said it is (or "default").
struct Caller {
  std::string user;
  std::string team;
  bool admin = false;
  std::string token_id;  // "" with authentication off
};

struct TokenParts {
  std::string id;
  std::string secret;
};

// "Bearer TOKEN" (the scheme case-insensitive, spaces around TOKEN ignored) -> TOKEN.
// Unauthenticated naming what is wrong; the token itself never appears in the message.
StatusOr<std::string> ParseBearer(std::string_view header);
// "gst_<16 hex>_<64 hex>" -> its parts; Unauthenticated otherwise.
StatusOr<TokenParts> ParseToken(std::string_view token);
// Lower-case hex SHA-256 of `data` (OpenSSL EVP).
std::string Sha256Hex(std::string_view data);
// A user or team name: 1-64 of [A-Za-z0-9._@-], not starting with '-'. InvalidArgument
// naming `field` and the value otherwise.
Status CheckPrincipalName(const std::string& value, const std::string& field);

struct MintedToken {
  store::TokenRecord record;  // what is stored
  std::string token;          // what is shown once
};
// A fresh token for `user` (team "" = "default"). Internal when the random source fails.
StatusOr<MintedToken> MintToken(const std::string& user, const std::string& team, bool admin,
                                int64_t created_ms);
// Issue 35: a fresh agent token bound to node `node` (rpc::CheckNodeName; InvalidArgument
// naming --agent otherwise). Its record's user is "agent:NODE", team "", not admin.
StatusOr<MintedToken> MintAgentToken(const std::string& node, int64_t created_ms);

// The tokens a server accepts, by id. Not thread-safe: the ControlPlane holds it under its lock.
class TokenTable {
 public:
  void Put(store::TokenRecord record);
  // False when no token has that id.
  bool Remove(const std::string& id);
  const store::TokenRecord* Find(const std::string& id) const;
  std::vector<store::TokenRecord> List() const;  // ascending id
  size_t size() const { return tokens_.size(); }
  // The caller a bearer token names, or Unauthenticated. An agent token is refused here
  // (Unauthenticated): it authenticates an agent's link only.
  StatusOr<Caller> Authenticate(std::string_view token) const;
  // Issue 35: Ok when `token` is an agent token bound to node `node`. Unauthenticated for an
  // unknown, revoked or wrong token or a user's token; PermissionDenied naming both nodes for
  // an agent token of another node.
  Status AuthenticateAgent(std::string_view token, const std::string& node) const;

 private:
  // The record `token` names when its secret matches; Unauthenticated otherwise.
  StatusOr<const store::TokenRecord*> Verify(std::string_view token) const;

  std::map<std::string, store::TokenRecord> tokens_;
};

}  // namespace gpusched::server
