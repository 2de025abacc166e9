// The names of the trust set-up (rpc/tls.h): `certs init --agent` and `--server-host` values,
// the host part of --listen/--http and the loopback rule that decides whether a server may
// start without TLS; and the task credentials the agent hands gpusched-shim
// (agent/task_credentials.h: "UID:GID:G1,G2,..."); and the gRPC target of a --server
// address (rpc/channel.h: "ipv4:" in front of an IPv4 literal with a port, else unchanged).
// Errors are InvalidArgument naming the flag; an accepted node name is a plain file name; a
// loopback host is never "0.0.0.0"-like; credentials that parse format back to the same text.

#include <cstring>
#include <string>

#include "agent/task_credentials.h"
#include "fuzz/fuzz_check.h"
#include "rpc/channel.h"
#include "rpc/tls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  const std::string_view text = fuzz::Text(data, size);
  const std::string shown(text);

  if (Status s = rpc::CheckNodeCertName(text, "--agent"); s.ok()) {
    FUZZ_REQUIRE(!text.empty() && text.find('/') == std::string_view::npos && text != "." &&
                     text != ".." && text != "ca" && text != "server",
                 shown);
  } else {
    FUZZ_REQUIRE(s.code() == StatusCode::kInvalidArgument, s.ToString());
    FUZZ_REQUIRE(s.message().starts_with("--agent: "), s.ToString());
  }
  if (Status s = rpc::CheckServerHost(text, "--server-host"); !s.ok()) {
    FUZZ_REQUIRE(s.code() == StatusCode::kInvalidArgument, s.ToString());
    FUZZ_REQUIRE(s.message().starts_with("--server-host: "), s.ToString());
  } else {
    FUZZ_REQUIRE(text.find_first_of(" ,/\n") == std::string_view::npos, shown);
  }
  const std::string host = rpc::HostOf(text);
  FUZZ_REQUIRE(host.size() <= text.size(), shown);
  if (rpc::IsLoopbackHost(host)) {
    FUZZ_REQUIRE(host != "0.0.0.0" && host != "::" && !host.empty(), shown);
  }

  const std::string target = rpc::ChannelTarget(shown);
  if (target != shown) {
    FUZZ_REQUIRE(target == "ipv4:" + shown, target);
    const size_t colon = shown.rfind(':');
    FUZZ_REQUIRE(colon != std::string::npos && colon + 1 < shown.size() &&
                     shown.find_first_not_of("0123456789.:") == std::string::npos,
                 shown);
  }

  // Credentials: a NUL-terminated copy (the shim reads an environment variable).
  const std::string creds(text);
  agent::TaskCredentials c;
  if (agent::ParseTaskCredentials(creds.c_str(), &c)) {
    FUZZ_REQUIRE(c.group_count <= agent::kMaxTaskGroups, shown);
    char buf[agent::kMaxTaskGroups * 11 + 32];
    const size_t len = agent::FormatTaskCredentials(c, buf, sizeof buf);
    FUZZ_REQUIRE(len > 0, shown);
    agent::TaskCredentials back;
    FUZZ_REQUIRE(agent::ParseTaskCredentials(buf, &back), std::string(buf));
    FUZZ_REQUIRE(back.uid == c.uid && back.gid == c.gid && back.group_count == c.group_count &&
                     std::memcmp(back.groups, c.groups, c.group_count * sizeof(gid_t)) == 0,
                 shown);
  }
  return 0;
}
