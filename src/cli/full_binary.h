#pragma once
// Two binaries, one command line. `gpusched` is the client: the commands that talk to a
// server (submit, ls, show, logs, cancel, why, nodes, cordon, drain, token, quota,
// accounting), linked with nothing a client does not use (no SQLite, HTTP server, agent or
// simulator) and, outside sanitizer builds, with its C++ runtime, OpenSSL and gRPC linked in,
// so that it starts without resolving the symbols of shared libraries. Every other command
// (server, agent, dev, demo, sim, bench, certs, extender, status, ...) and the full --help
// belong to `gpusched-full`, installed next to it: the client replaces itself with it
// (execv, same pid, same arguments), so `gpusched server` is what it always was.

#include <CLI/CLI.hpp>

#include <vector>

namespace gpusched::cli {

// The name of the whole binary, next to the client's own executable.
inline constexpr const char* kFullBinaryName = "gpusched-full";

// Whether `argv` names one of `app`'s commands (after the global --ca FILE and --server ADDR),
// or only asks for --version: then the client binary runs it. An empty command line, --help
// and every other command go to the whole binary.
bool HandledByClientBinary(const CLI::App& app, int argc, char** argv);

// `gpusched --json ls` as `gpusched ls --json`: a --json before the command's name (among the
// global --ca FILE and --server ADDR) is moved after the command's words (`quota ls`), where
// each command takes it. `argv` is argc pointers and a null; the result is the same pointers
// in the new order, null-terminated. Nothing else moves.
std::vector<char*> WithJsonAfterTheCommand(int argc, char** argv);

// Replaces this process with gpusched-full and the same arguments. Returns only on failure,
// after printing why: the exit code to use.
int ExecFullBinary(char** argv);

}  // namespace gpusched::cli
