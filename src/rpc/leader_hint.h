#pragma once
// The "not leader" answer of a standby server, shared by the server that writes it and the
// clients (CLI, agents) that follow it: Unavailable with the message
//   "not leader; leader is 10.0.0.2:7070 (...)"   or   "not leader; no leader elected yet (...)".

#include <string>

namespace gpusched::rpc {

inline std::string NotLeaderMessage(const std::string& leader, const std::string& detail) {
  std::string m =
      leader.empty() ? "not leader; no leader elected yet" : "not leader; leader is " + leader;
  if (!detail.empty()) m += " (" + detail + ")";
  return m;
}

inline bool IsNotLeader(const std::string& message) {
  return message.rfind("not leader; ", 0) == 0;
}

// The leader named by a NotLeaderMessage; "" when none is named (or not such a message).
inline std::string LeaderHint(const std::string& message) {
  static const std::string kMark = "not leader; leader is ";
  if (message.rfind(kMark, 0) != 0) return "";
  const size_t end = message.find(' ', kMark.size());
  return message.substr(kMark.size(), end == std::string::npos ? std::string::npos : end - kMark.size());
}

}  // namespace gpusched::rpc
