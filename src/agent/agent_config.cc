#include "agent/agent_config.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <map>
#include <set>

#include "base/units.h"
#include "core/node_rules.h"

namespace gpusched::agent {
namespace {

// One taint: the flag's text ("dedicated=infer:NoSchedule") or {key, value, effect}.
StatusOr<core::Taint> TaintFrom(const YAML::Node& node, const std::string& field) {
  if (node.IsScalar()) return core::ParseTaint(node.Scalar(), field);
  if (!node.IsMap()) return InvalidArgument(field + ": expected KEY=VALUE:EFFECT or a mapping");
  std::string key, value, effect;
  for (const auto& kv : node) {
    const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "";
    std::string* out = name == "key"      ? &key
                       : name == "value"  ? &value
                       : name == "effect" ? &effect
                                          : nullptr;
    if (out == nullptr) {
      return InvalidArgument(field + ": \"" + name + "\" is not key, value or effect");
    }
    if (!kv.second.IsScalar()) return InvalidArgument(field + "." + name + ": expected a word");
    *out = kv.second.Scalar();
  }
  return core::ParseTaint(key + (value.empty() ? "" : "=" + value) + ":" + effect, field);
}

Status ApplyRules(const std::string& key, const YAML::Node& value, const std::string& field,
                  AgentConfig& c) {
  if (key == "labels") {
    if (!value.IsMap()) return InvalidArgument(field + ": expected a mapping of label: value");
    for (const auto& kv : value) {
      if (!kv.first.IsScalar() || !kv.second.IsScalar()) {
        return InvalidArgument(field + ": a label and its value must be single words");
      }
      const std::string k = kv.first.Scalar(), v = kv.second.Scalar();
      GS_RETURN_IF_ERROR(core::ValidateLabel(k, v, field, k + "=" + v));
      c.labels[k] = v;
    }
    return Status::Ok();
  }
  if (!value.IsSequence()) return InvalidArgument(field + ": expected a list of taints");
  for (size_t i = 0; i < value.size(); ++i) {
    GS_ASSIGN_OR_RETURN(core::Taint t,
                        TaintFrom(value[i], field + "[" + std::to_string(i) + "]"));
    c.taints.push_back(std::move(t));
  }
  return Status::Ok();
}

// The keys of one value (docs/agent-config.md lists each), bound to `c`.
std::map<std::string, std::string*> ScalarKeys(AgentConfig& c) {
  return {{"server", &c.server},   {"name", &c.name},         {"gpus", &c.gpus},
          {"listen", &c.listen},   {"data_dir", &c.data_dir}, {"tls_dir", &c.tls_dir},
          {"topology", &c.topology}, {"log_level", &c.log_level},
          {"log_format", &c.log_format}};
}

// Keys parsed by a branch of their own: a mapping or a list (ApplyRules), or a size or a
// duration with its own bounds (ApplyOutputKey).
constexpr std::array<std::string_view, 4> kStructuredKeys = {"labels", "taints", "log_max_size",
                                                             "task_files_retention"};

// Issue 39: `log_max_size: 1GiB` (a size, > 0) and `task_files_retention: 1h` (a duration;
// 0 = keep forever).
Status ApplyOutputKey(const std::string& key, const YAML::Node& value, const std::string& field,
                      AgentConfig& c) {
  if (!value.IsScalar()) return InvalidArgument(field + ": expected a single value");
  if (key == "log_max_size") {
    GS_ASSIGN_OR_RETURN(MiB mib, ParseSizeMiB(value.Scalar(), field));
    if (mib <= 0) return InvalidArgument(field + ": \"" + value.Scalar() + "\": must be > 0");
    c.log_max_size_bytes = mib * (int64_t{1} << 20);
    return Status::Ok();
  }
  GS_ASSIGN_OR_RETURN(c.task_files_retention_ms, ParseDurationMs(value.Scalar(), field));
  if (c.task_files_retention_ms < 0) {
    return InvalidArgument(field + ": \"" + value.Scalar() + "\": must be >= 0 (0 = keep)");
  }
  return Status::Ok();
}

Status ApplyKeys(const YAML::Node& root, const std::string& source, AgentConfig& c) {
  const std::map<std::string, std::string*> scalars = ScalarKeys(c);
  std::set<std::string> seen;  // YAML forbids a key twice; yaml-cpp would apply both
  for (const auto& kv : root) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    const std::string field = source + ": " + key;
    if (!seen.insert(key).second) return InvalidArgument(field + ": given twice");
    if (key == "labels" || key == "taints") {
      GS_RETURN_IF_ERROR(ApplyRules(key, kv.second, field, c));
      continue;
    }
    if (key == "log_max_size" || key == "task_files_retention") {
      GS_RETURN_IF_ERROR(ApplyOutputKey(key, kv.second, field, c));
      continue;
    }
    auto it = scalars.find(key);
    if (it == scalars.end()) {
      std::string known;
      for (const std::string& name : AgentConfigKeys()) known += name + ", ";
      known.resize(known.size() - 2);
      return InvalidArgument(source + ": unknown key \"" + key + "\" (known: " + known + ")");
    }
    if (!kv.second.IsScalar()) return InvalidArgument(field + ": expected a single value");
    *it->second = kv.second.Scalar();
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> AgentConfigKeys() {
  AgentConfig scratch;
  std::vector<std::string> out;
  for (const auto& [key, field] : ScalarKeys(scratch)) out.push_back(key);
  out.insert(out.end(), kStructuredKeys.begin(), kStructuredKeys.end());
  return out;
}

StatusOr<bool> IsAgentConfigDefault(const std::string& key, const std::string& value) {
  AgentConfig defaults;
  const auto fields = ScalarKeys(defaults);
  const auto it = fields.find(key);
  if (it == fields.end()) return NotFound(key + ": not an agent key of one value");
  return *it->second == value;
}

Status ApplyAgentConfigYaml(std::string_view text, const std::string& source,
                            AgentConfig& c) {
  try {  // yaml-cpp throws on malformed text, and on some malformed nodes
    const YAML::Node root = YAML::Load(std::string(text));
    if (root.IsNull()) return Status::Ok();
    if (!root.IsMap()) return InvalidArgument(source + ": expected a mapping of options");
    return ApplyKeys(root, source, c);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

}  // namespace gpusched::agent
