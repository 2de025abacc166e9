#pragma once
// A SocketOwnerLookup (server/peer_identity.h) that answers from a table instead of the
// kernel, and records what it was asked; a lookup it has no entry for is NotFound, and
// `fail` makes every lookup fail as a kernel that cannot be asked would.
//
// Thread-safety: none; set it up before use.

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "server/peer_identity.h"

namespace gpusched::server::testing {

class FakeSocketOwnerLookup final : public SocketOwnerLookup {
 public:
  using Key = std::tuple<std::string, uint16_t, std::string, uint16_t>;
  // The socket local -> remote belongs to `uid`.
  void Add(const TcpEndpoint& local, const TcpEndpoint& remote, uint32_t uid) {
    owners_[{local.address, local.port, remote.address, remote.port}] = uid;
  }
  StatusOr<uint32_t> OwnerUid(const TcpEndpoint& local, const TcpEndpoint& remote) override {
    asked.push_back({local.address, local.port, remote.address, remote.port});
    if (fail) return Unavailable("sock_diag: injected failure");
    auto it = owners_.find({local.address, local.port, remote.address, remote.port});
    if (it == owners_.end()) return NotFound("sock_diag: no such socket");
    return it->second;
  }
  std::vector<Key> asked;
  bool fail = false;

 private:
  std::map<Key, uint32_t> owners_;
};

}  // namespace gpusched::server::testing
