#pragma once
// The "not leader" answer of a standby server, shared by the server that writes it and the
// clients (CLI, agents) that follow it, and the server lists they are given. The answer is
// Unavailable with the message
//   "not leader; leader is 10.0.0.2:7070 (...)"   or   "not leader; no leader elected yet (...)".

#include <string>
#include <vector>

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

// Splits a server list "a:1, b:2" (--server, GPUSCHED_SERVER) into addresses, dropping
// empty entries and the spaces around each.
inline std::vector<std::string> SplitServerList(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string s = list.substr(start, comma - start);
    const size_t first = s.find_first_not_of(' ');
    const size_t last = s.find_last_not_of(' ');
    if (first != std::string::npos) out.push_back(s.substr(first, last - first + 1));
    start = comma + 1;
  }
  return out;
}

}  // namespace gpusched::rpc
