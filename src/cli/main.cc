// gpusched: the one binary. Subcommands register themselves from their own files.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/full_binary.h"
#include "cli/usage_errors.h"
#ifdef GPUSCHED_CLIENT_ONLY
#include <malloc.h>
#endif
#ifdef GPUSCHED_HAVE_CONTROL_PLANE
#include <absl/synchronization/mutex.h>
#include <grpc/grpc.h>

#include "cli/client.h"
#include "rpc/grpc_log.h"
#endif

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// A command is done once its output is out. Tearing gRPC down (joining its threads one by one)
// and running every static destructor took a quarter of a `gpusched submit`; the kernel frees
// the same in one step. Sanitizer builds exit normally, so their leak checks still run.
int Finish(int code) {
  if (kSanitized) {
#ifdef GPUSCHED_HAVE_CONTROL_PLANE
    grpc_shutdown();  // the reference main took
#endif
    return code;
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

#ifdef GPUSCHED_HAVE_CONTROL_PLANE
// gRPC and Abseil as this process wants them, before any channel or server exists.
void ConfigureGrpc() {
  // Debian's Abseil is built with its debug-mode deadlock detector on: every lock of gRPC's
  // mutexes updated a global lock graph, ~3% of the server's CPU under load. Lock order is
  // checked by our ThreadSanitizer runs instead.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // gRPC's log lines in one line of ours (rpc/grpc_log.h); GPUSCHED_GRPC_LOG=raw keeps its own.
  // The client binary reports every failure from its calls' status: gRPC's lines only
  // when asked for (GRPC_VERBOSITY).
  if (const char* mode = std::getenv("GPUSCHED_GRPC_LOG");
      mode == nullptr || std::string(mode) != "raw") {
#ifdef GPUSCHED_CLIENT_ONLY
    gpusched::rpc::InstallGrpcLogSink(std::getenv("GRPC_VERBOSITY") != nullptr
                                          ? gpusched::rpc::GrpcLogMode::kDaemon
                                          : gpusched::rpc::GrpcLogMode::kClient);
#else
    gpusched::rpc::InstallGrpcLogSink();
#endif
  }
}
#endif

#ifdef GPUSCHED_CLIENT_ONLY
// The client binary (full_binary.h): the commands that talk to a server, and nothing else;
// every other command, and the full --help, is the whole binary's.
void RegisterClientCommands(CLI::App& app) {
  if (!kSanitized) {
    // One malloc arena for every thread: a short-lived client gains nothing from one per
    // thread, and each of gRPC's 5 threads made one of its own (a 64 MiB mapping) on its
    // first allocation. 0.6 ms off a `gpusched submit`'s median (60 alternating runs).
    mallopt(M_ARENA_MAX, 1);
    gpusched::cli::KeepChannelsUntilExit();  // Finish ends the process with std::_Exit
  }
  gpusched::cli::RegisterTaskCommands(app);
  gpusched::cli::RegisterNodeCommands(app);
  gpusched::cli::RegisterTokenCommands(app);
  gpusched::cli::RegisterQuotaCommands(app);
}
#else
// Every command of the whole binary, `bench` and its suites among them, in --help's order.
void RegisterEveryCommand(CLI::App& app) {
  // Everyday commands first (issue 41), then running the parts, then benchmarks and tools.
#ifdef GPUSCHED_HAVE_CONTROL_PLANE
  gpusched::cli::RegisterTaskCommands(app);
  gpusched::cli::RegisterNodeCommands(app);
  gpusched::cli::RegisterTokenCommands(app);
  gpusched::cli::RegisterQuotaCommands(app);
  gpusched::cli::RegisterDaemons(app);
  gpusched::cli::RegisterAdminCommands(app);
  gpusched::cli::RegisterCerts(app);
  gpusched::cli::RegisterDemo(app);
#endif
  CLI::App* bench = app.add_subcommand("bench", "Run a benchmark suite");
  bench->require_subcommand(1);
#ifdef GPUSCHED_HAVE_CORE
  gpusched::cli::RegisterBenchCore(*bench);
#endif
#ifdef GPUSCHED_HAVE_DISPATCH
  gpusched::cli::RegisterBenchDispatch(*bench);
#endif
#ifdef GPUSCHED_HAVE_CHUNKS
  gpusched::cli::RegisterBenchChunks(*bench);
#endif
#ifdef GPUSCHED_HAVE_CONTROL_PLANE
  gpusched::cli::RegisterBenchE2e(*bench);
  gpusched::cli::RegisterBenchScale(*bench);
  gpusched::cli::RegisterBenchUtilization(*bench);
  gpusched::cli::RegisterBenchChaos(*bench);
  gpusched::cli::RegisterBenchSoak(*bench);
  gpusched::cli::RegisterHaCommands(app, *bench);
#endif
#ifdef GPUSCHED_HAVE_SIM
  gpusched::cli::RegisterSim(app);
#endif
#ifdef GPUSCHED_HAVE_EXTENDER
  gpusched::cli::RegisterExtender(app);
  gpusched::cli::RegisterBenchExtender(*bench);
#endif
}
#endif  // GPUSCHED_CLIENT_ONLY

// Parses the command line, which runs the command: its exit code.
int ParseAndRun(CLI::App& app, int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto end = std::find(args.begin(), args.end(), "--");  // the task's own words follow
  gpusched::cli::SetJsonErrors(std::find(args.begin(), end, "--json") != end);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {  // a command ended with its own exit code
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    gpusched::cli::PrintError(
        args.empty() ? "missing command (see gpusched --help)"
                     : gpusched::cli::DescribeParseError(app, args, e),
        gpusched::cli::kExitUsage);
    return gpusched::cli::kExitUsage;
  }
  return gpusched::cli::kExitOk;
}

}  // namespace

int main(int argc, char** raw_argv) {
  // `gpusched --json ls` reads as `gpusched ls --json` from here on (full_binary.h).
  std::vector<char*> reordered = gpusched::cli::WithJsonAfterTheCommand(argc, raw_argv);
  char** argv = reordered.data();
#ifdef GPUSCHED_HAVE_CONTROL_PLANE
  ConfigureGrpc();
#endif
  CLI::App app{"gpusched: a GPU cluster scheduler", "gpusched"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpusched " GPUSCHED_VERSION);  // CMake project()
#ifdef GPUSCHED_HAVE_CONTROL_PLANE
  // Global: `gpusched --ca FILE --server ADDR ls`; every client command also takes both after
  // its name.
  gpusched::cli::AddGlobalClientFlags(&app);
#endif
#ifdef GPUSCHED_CLIENT_ONLY
  RegisterClientCommands(app);
  if (!gpusched::cli::HandledByClientBinary(app, argc, argv)) {
    return gpusched::cli::ExecFullBinary(argv);
  }
#else
  RegisterEveryCommand(app);
#endif
#ifdef GPUSCHED_HAVE_CONTROL_PLANE
  // Held to the end: a client's channel going away does not shut gRPC down (Finish).
  grpc_init();
#endif
  return Finish(ParseAndRun(app, argc, argv));
}
