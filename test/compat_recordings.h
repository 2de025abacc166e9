#pragma once
// Issue 39: the recordings of one version (test/compat/VERSION/, docs/upgrades.md). What the
// agent, the CLI and the server of this version put on the wire, what an agent's task
// supervisor writes into the journal, and what the server's store holds, each built by this
// version's own code with fixed values. `compat_record DIR` writes them; compat_e2e_test
// reads the files of every version with the code of today and checks those values.
//
// The values never change: a later version adds recordings (or fields to new ones), it does
// not edit these, so the checks of compat_e2e_test hold for the files of every version.

#include <map>
#include <string>

namespace gpusched::testing {

// File name -> contents: `.binpb` a serialized gpusched.v1 message (the type is the name's
// prefix: agent_* AgentMessage, server_* ServerMessage, cli_* the request the CLI sends,
// answer_* the server's answer), `.txt` a journal record, `store.sql` a SQLite store.
// REQUIRES: for store.sql, `scratch_dir` is a directory this process may write.
std::map<std::string, std::string> TodaysRecordings(const std::string& scratch_dir);

// The node name and task the recorded agent messages speak of.
inline constexpr const char* kCompatNode = "compat-n1";
inline constexpr int kCompatGpuMib = 16384;

}  // namespace gpusched::testing
