#include "cli/log_flags.h"

#include "base/log.h"
#include "cli/commands.h"
#include "cli/usage_errors.h"

namespace gpusched::cli {

void AddLogFlags(CLI::App* cmd, LogFlags& f, bool config_keys) {
  cmd->add_option("--log-level", f.level,
                  std::string("Lowest level of line logged: trace, debug, info, warn or error "
                              "(default: info") +
                      (config_keys ? ", or log_level in --config)" : ")"));
  cmd->add_option("--log-format", f.format,
                  std::string("Log lines as text (time, level, component, [task N] [node N], "
                              "message) or json (one object per line: time, level, component, "
                              "msg, task, node) (default: text") +
                      (config_keys ? ", or log_format in --config)" : ")"));
}

void ApplyLogFlags(const LogFlags& f, const std::string& file_level,
                   const std::string& file_format, const std::string& source) {
  const std::string file_field = source.empty() ? "" : source + ": ";
  logging::Level level = logging::Level::kInfo;
  logging::Format format = logging::Format::kText;
  if (!f.level.empty()) {
    level = OrFail(logging::ParseLevel(f.level, "--log-level"), kExitUsage);
  } else if (!file_level.empty()) {
    level = OrFail(logging::ParseLevel(file_level, file_field + "log_level"), kExitUsage);
  }
  if (!f.format.empty()) {
    format = OrFail(logging::ParseFormat(f.format, "--log-format"), kExitUsage);
  } else if (!file_format.empty()) {
    format = OrFail(logging::ParseFormat(file_format, file_field + "log_format"), kExitUsage);
  }
  logging::Configure(level, format);
}

}  // namespace gpusched::cli
