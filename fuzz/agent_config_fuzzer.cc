// `gpusched agent --config FILE` (agent::ApplyAgentConfigYaml): errors are InvalidArgument
// starting with the file's name; what loads has labels that validate and taints that format
// and parse back to themselves (core/node_rules.h).

#include <string>

#include "agent/agent_config.h"
#include "core/node_rules.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  agent::AgentConfig c;
  const Status s = agent::ApplyAgentConfigYaml(fuzz::Text(data, size), "agent.yaml", c);
  if (!s.ok()) {
    FUZZ_REQUIRE(s.code() == StatusCode::kInvalidArgument, s.ToString());
    FUZZ_REQUIRE(s.message().starts_with("agent.yaml"), s.ToString());
    return 0;
  }
  for (const auto& [key, value] : c.labels) {
    FUZZ_REQUIRE(core::ValidateLabel(key, value, "labels", key).ok(), key + "=" + value);
  }
  for (const core::Taint& t : c.taints) {
    auto back = core::ParseTaint(core::FormatTaint(t), "taints");
    FUZZ_REQUIRE(back.ok() && *back == t, core::FormatTaint(t));
  }
  return 0;
}
