#pragma once
// `gpusched agent --config FILE`: the agent's options in YAML, for a node set up once (systemd,
// configuration management) instead of a long command line. Flags given as well win; labels
// and taints of the file and the flags add up (a label given in both takes the flag's value).
//
//   server: 10.0.0.1:7070,10.0.0.2:7070   # the server, or the servers of an HA control plane
//   name: gpu1
//   gpus: 8x80GiB          # simulated GPUs when no NVML
//   listen: 0.0.0.0:7071
//   data_dir: /var/lib/gpusched-agent
//   tls_dir: /etc/gpusched/tls
//   topology: nvlink-pairs
//   labels: {zone: a, gpusched.io/gpu: a100}            # CN115981827A claim 1: node selectors
//   taints: [dedicated=infer:NoSchedule, {key: spot, effect: PreferNoSchedule}]
//   log_level: info        # issue 39: trace|debug|info|warn|error (--log-level wins)
//   log_format: text       # or json (--log-format wins)
//   log_max_size: 1GiB     # the most output one task's log keeps; the rest is dropped
//   task_files_retention: 1h  # a finished task's log is removed this long after; 0 = keep
//
// Unknown keys and bad values are errors naming the source, the key and the value
// (core/node_rules.h for labels and taints). docs/agent-config.md lists every key.

#include <string_view>
#include <vector>

#include "agent/agent.h"
#include "base/status.h"

namespace gpusched::agent {

// Applies the YAML `text` to `config`; `source` (the file name) starts every error. On error
// `config` may be partly changed (the command stops anyway).
Status ApplyAgentConfigYaml(std::string_view text, const std::string& source,
                            AgentConfig& config);

// Every key ApplyAgentConfigYaml knows; any other key is refused. docs/agent-config.md lists
// each (test/config_reference_test.cc keeps the two equal).
std::vector<std::string> AgentConfigKeys();
// Whether `value` given for `key` is what an agent has when the file does not set it.
// NotFound for labels, taints and keys that do not exist.
StatusOr<bool> IsAgentConfigDefault(const std::string& key, const std::string& value);

}  // namespace gpusched::agent
