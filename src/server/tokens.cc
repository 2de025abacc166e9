#include "server/tokens.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cctype>

#include "rpc/tls.h"

namespace gpusched::server {
namespace {

constexpr std::string_view kPrefix = "gst_";
constexpr size_t kIdHex = 16;
constexpr size_t kSecretHex = 64;
constexpr std::string_view kRefused = "the token is unknown, revoked or wrong";

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 0xf];
  }
  return out;
}

StatusOr<std::string> RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) {
    return Internal("token: the random source (RAND_bytes) failed");
  }
  return Hex(buf.data(), buf.size());
}

}  // namespace

StatusOr<std::string> ParseBearer(std::string_view header) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  header = trim(header);
  constexpr std::string_view kScheme = "bearer";
  bool scheme = header.size() > kScheme.size() &&
                (header[kScheme.size()] == ' ' || header[kScheme.size()] == '\t');
  for (size_t i = 0; scheme && i < kScheme.size(); ++i) {
    scheme = std::tolower(static_cast<unsigned char>(header[i])) == kScheme[i];
  }
  if (!scheme) {
    return Unauthenticated("authorization: expected \"Bearer TOKEN\"");
  }
  std::string_view token = trim(header.substr(kScheme.size()));
  if (token.empty()) return Unauthenticated("authorization: the bearer token is empty");
  return std::string(token);
}

StatusOr<TokenParts> ParseToken(std::string_view token) {
  const size_t want = kPrefix.size() + kIdHex + 1 + kSecretHex;
  if (token.size() != want || token.substr(0, kPrefix.size()) != kPrefix ||
      token[kPrefix.size() + kIdHex] != '_') {
    return Unauthenticated("token: not a gpusched token (gst_<id>_<secret>)");
  }
  const std::string_view id = token.substr(kPrefix.size(), kIdHex);
  const std::string_view secret = token.substr(kPrefix.size() + kIdHex + 1);
  if (!IsLowerHex(id) || !IsLowerHex(secret)) {
    return Unauthenticated("token: not a gpusched token (gst_<id>_<secret>)");
  }
  return TokenParts{std::string(id), std::string(secret)};
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // EVP_Digest only fails when out of memory; the empty string then never matches a
  // stored 64-digit hash.
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr) != 1) return "";
  return Hex(digest, len);
}

Status CheckPrincipalName(const std::string& value, const std::string& field) {
  bool ok = !value.empty() && value.size() <= 64 && value[0] != '-';
  for (char c : value) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                c == '@' || c == '-');
  }
  if (!ok) {
    return InvalidArgument(field + ": \"" + value +
                           "\" must be 1-64 letters, digits or . _ @ - (not starting with -)");
  }
  return Status::Ok();
}

StatusOr<MintedToken> MintToken(const std::string& user, const std::string& team, bool admin,
                                int64_t created_ms) {
  GS_RETURN_IF_ERROR(CheckPrincipalName(user, "user"));
  const std::string t = team.empty() ? "default" : team;
  GS_RETURN_IF_ERROR(CheckPrincipalName(t, "team"));
  GS_ASSIGN_OR_RETURN(std::string id, RandomHex(kIdHex / 2));
  GS_ASSIGN_OR_RETURN(std::string secret, RandomHex(kSecretHex / 2));
  MintedToken out;
  out.record = {id, user, t, admin, created_ms, Sha256Hex(secret)};
  out.token = std::string(kPrefix) + id + "_" + secret;
  return out;
}

StatusOr<MintedToken> MintAgentToken(const std::string& node, int64_t created_ms) {
  GS_RETURN_IF_ERROR(rpc::CheckNodeName(node, "--agent"));
  GS_ASSIGN_OR_RETURN(std::string id, RandomHex(kIdHex / 2));
  GS_ASSIGN_OR_RETURN(std::string secret, RandomHex(kSecretHex / 2));
  MintedToken out;
  // "agent:" cannot pass CheckPrincipalName: no user's token ever names this user, and a
  // server that predates agent tokens runs nothing as it.
  out.record = {id, "agent:" + node, "", false, created_ms, Sha256Hex(secret), node};
  out.token = std::string(kPrefix) + id + "_" + secret;
  return out;
}

void TokenTable::Put(store::TokenRecord record) {
  std::string id = record.id;
  tokens_[std::move(id)] = std::move(record);
}

bool TokenTable::Remove(const std::string& id) { return tokens_.erase(id) > 0; }

const store::TokenRecord* TokenTable::Find(const std::string& id) const {
  auto it = tokens_.find(id);
  return it == tokens_.end() ? nullptr : &it->second;
}

std::vector<store::TokenRecord> TokenTable::List() const {
  std::vector<store::TokenRecord> out;
  for (const auto& [id, r] : tokens_) out.push_back(r);
  return out;
}

StatusOr<const store::TokenRecord*> TokenTable::Verify(std::string_view token) const {
  GS_ASSIGN_OR_RETURN(TokenParts parts, ParseToken(token));
  const store::TokenRecord* r = Find(parts.id);
  // Hash either way, so an unknown id costs what a wrong secret does.
  const std::string hash = Sha256Hex(parts.secret);
  if (r == nullptr || r->secret_sha256.size() != hash.size() ||
      CRYPTO_memcmp(r->secret_sha256.data(), hash.data(), hash.size()) != 0) {
    return Unauthenticated(std::string(kRefused));
  }
  return r;
}

StatusOr<Caller> TokenTable::Authenticate(std::string_view token) const {
  GS_ASSIGN_OR_RETURN(const store::TokenRecord* r, Verify(token));
  if (!r->agent_node.empty()) {
    return Unauthenticated("token " + r->id + " is an agent token (node " + r->agent_node +
                           "): it authenticates that node's agent only, not API calls");
  }
  return Caller{r->user, r->team, r->admin, r->id};
}

Status TokenTable::AuthenticateAgent(std::string_view token, const std::string& node) const {
  GS_ASSIGN_OR_RETURN(const store::TokenRecord* r, Verify(token));
  if (r->agent_node.empty()) {
    return Unauthenticated("token " + r->id + " is a user's token (" + r->user +
                           "), not an agent token: create one with `gpusched token create "
                           "--agent " + node + "`");
  }
  if (r->agent_node != node) {
    return PermissionDenied("agent token " + r->id + " is bound to node \"" + r->agent_node +
                            "\": it may not register node \"" + node + "\"");
  }
  return Status::Ok();
}

}  // namespace gpusched::server
