#include "cli/rule_flags.h"

#include "cli/client.h"
#include "core/node_rules.h"

namespace gpusched::cli {

CLI::Option* AddRepeatable(CLI::App* cmd, const std::string& flag,
                           std::vector<std::string>& values, const std::string& help) {
  // One value per occurrence: `--label a=1 -- cmd` must not swallow what follows.
  return cmd->add_option(flag, values, help)->allow_extra_args(false);
}

std::map<std::string, std::string> LabelFlags(const std::vector<std::string>& values,
                                              const std::string& flag) {
  std::map<std::string, std::string> out;
  for (const std::string& v : values) {
    auto [key, value] = OrFail(core::ParseLabel(v, flag));
    auto [it, fresh] = out.emplace(key, value);
    if (!fresh && it->second != value) {
      Fail(InvalidArgument(flag + ": \"" + v + "\": the key " + key + " is given twice (" +
                           key + "=" + it->second + " first)"));
    }
  }
  return out;
}

std::vector<core::Taint> TaintFlags(const std::vector<std::string>& values,
                                    const std::string& flag) {
  std::vector<core::Taint> out;
  for (const std::string& v : values) out.push_back(OrFail(core::ParseTaint(v, flag)));
  return out;
}

std::vector<core::Toleration> TolerationFlags(const std::vector<std::string>& values,
                                              const std::string& flag) {
  std::vector<core::Toleration> out;
  for (const std::string& v : values) out.push_back(OrFail(core::ParseToleration(v, flag)));
  return out;
}

}  // namespace gpusched::cli
