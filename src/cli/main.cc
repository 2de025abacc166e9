// gpusched: the one binary. Subcommands register themselves from their own files.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/usage_errors.h"
#ifdef GPUSCHED_HAVE_CONTROL_PLANE
#include "cli/client.h"
#endif

int main(int argc, char** argv) {
  CLI::App app{"gpusched: a GPU cluster scheduler", "gpusched"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpusched 0.1.0");
#ifdef GPUSCHED_HAVE_CONTROL_PLANE
  // Global: `gpusched --ca FILE ls`; every client command also takes it after its name.
  gpusched::cli::AddCaFlag(&app);
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
#ifdef GPUSCHED_HAVE_SIM
  gpusched::cli::RegisterSim(app);
#endif
#ifdef GPUSCHED_HAVE_EXTENDER
  gpusched::cli::RegisterExtender(app);
  gpusched::cli::RegisterBenchExtender(*bench);
#endif
#ifdef GPUSCHED_HAVE_CONTROL_PLANE
  gpusched::cli::RegisterTaskCommands(app);
  gpusched::cli::RegisterNodeCommands(app);
  gpusched::cli::RegisterTokenCommands(app);
  gpusched::cli::RegisterQuotaCommands(app);
  gpusched::cli::RegisterDaemons(app);
  gpusched::cli::RegisterCerts(app);
  gpusched::cli::RegisterDemo(app);
  gpusched::cli::RegisterBenchE2e(*bench);
  gpusched::cli::RegisterBenchChaos(*bench);
  gpusched::cli::RegisterBenchSoak(*bench);
  gpusched::cli::RegisterHaCommands(app, *bench);
#endif

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
