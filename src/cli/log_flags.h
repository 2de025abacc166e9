#pragma once
// `--log-level trace|debug|info|warn|error` and `--log-format text|json` of the long-running
// commands (server, agent, extender, dev): they configure the daemons' logger (base/log.h).

#include <CLI/CLI.hpp>

#include <string>

namespace gpusched::cli {

struct LogFlags {
  std::string level, format;  // "" = not given
};

// Adds --log-level and --log-format to `cmd`, into `f`; `config_keys`: the command's --config
// file may hold log_level and log_format too (its help says so).
void AddLogFlags(CLI::App* cmd, LogFlags& f, bool config_keys = true);

// Configures the process's logger: a flag given wins over the configuration file's key
// (`file_level`, `file_format`, "" = not there), both over info and text. A bad value stops
// the command with a usage error naming the flag (or `source`: key) and the value.
void ApplyLogFlags(const LogFlags& f, const std::string& file_level = "",
                   const std::string& file_format = "", const std::string& source = "");

}  // namespace gpusched::cli
