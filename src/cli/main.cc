// gpusched: the one binary. Subcommands register themselves from their own files.

#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"gpusched: a GPU cluster scheduler", "gpusched"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpusched 0.1.0");

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
  gpusched::cli::RegisterDaemons(app);
  gpusched::cli::RegisterDemo(app);
  gpusched::cli::RegisterBenchE2e(*bench);
  gpusched::cli::RegisterBenchChaos(*bench);
  gpusched::cli::RegisterBenchSoak(*bench);
  gpusched::cli::RegisterHaCommands(app, *bench);
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {  // a command ended with its own exit code
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : gpusched::cli::kExitUsage;
  }
  return gpusched::cli::kExitOk;
}
