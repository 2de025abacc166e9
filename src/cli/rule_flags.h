#pragma once
// The node-rule flags of the command line, each repeatable: `agent --label K=V` and
// `--taint K[=V]:EFFECT`, `submit --selector K=V` and `--toleration K[=V][:EFFECT]`
// (core/node_rules.h has the syntax). Bad input ends the command with exit 2 and a message
// naming the flag and the value.

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

#include "core/node.h"

namespace gpusched::cli {

// Adds a repeatable string option (one value per occurrence) into `values`.
CLI::Option* AddRepeatable(CLI::App* cmd, const std::string& flag,
                           std::vector<std::string>& values, const std::string& help);

// KEY=VALUE pairs; a key given twice with different values is an error.
std::map<std::string, std::string> LabelFlags(const std::vector<std::string>& values,
                                              const std::string& flag);
std::vector<core::Taint> TaintFlags(const std::vector<std::string>& values,
                                    const std::string& flag);
std::vector<core::Toleration> TolerationFlags(const std::vector<std::string>& values,
                                              const std::string& flag);

}  // namespace gpusched::cli
