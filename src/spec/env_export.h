#pragma once
// `submit --export` and a job file's `export:` (after Slurm's --export): which of the
// caller's environment variables travel with a task.
//
//   ALL                 every variable of the caller's environment but gpusched's own
//                       (GPUSCHED_*: the CLI's token, server address, ...; core/reserved_env.h)
//   NONE                none (what a submit without --export sends, too)
//   VAR[,VAR...]        these, with their values in the caller's environment (one that is
//                       not set there is skipped, as Slurm does)
//   VAR=VALUE           this value (a value cannot hold a comma in the flag; in a job file's
//                       list it can)
//   ALL,VAR=VALUE,...   every variable, and these values on top (they win)
//
// Naming a GPUSCHED_* variable is an error, as is NONE with anything else, an empty item or a
// name that is not [A-Za-z_][A-Za-z0-9_]*. Text in, values out: the caller hands in its
// environment.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpusched::spec {

struct EnvExport {
  bool all = false;                           // ALL
  std::vector<std::string> names;             // VAR: the caller's value
  std::map<std::string, std::string> values;  // VAR=VALUE
};

// "ALL", "NONE", "A,B=1", ... `field` ("--export", "job.yaml:3: export") starts every error.
StatusOr<EnvExport> ParseEnvExport(std::string_view text, std::string_view field);
// The same over items already split (a job file's list): each item is ALL, NONE, VAR or
// VAR=VALUE.
StatusOr<EnvExport> ParseEnvExportItems(const std::vector<std::string>& items,
                                        std::string_view field);

// The variables `rule` sends, taken from `environment` (the caller's): never a GPUSCHED_* one.
std::map<std::string, std::string> ExportedEnv(
    const EnvExport& rule, const std::map<std::string, std::string>& environment);

}  // namespace gpusched::spec
