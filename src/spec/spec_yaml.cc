#include "spec/spec_yaml.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "base/units.h"
#include "core/node_rules.h"
#include "core/stop_signal.h"
#include "core/task_validation.h"

namespace gpusched::spec {
namespace {

// Parsing context: the source name for error messages.
class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Status Error(const YAML::Node& node, const std::string& message) const {
    const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    return InvalidArgument(source_ + (line > 0 ? ":" + std::to_string(line) : "") + ": " +
                           message);
  }

  // A key given twice: YAML forbids it, yaml-cpp keeps both and reads the first.
  Status CheckUnique(const YAML::Node& key_node, const std::string& key, const std::string& where,
                     std::map<std::string, int>& seen) const {
    const int line = key_node.Mark().line + 1;
    auto [it, fresh] = seen.try_emplace(key, line);
    if (fresh) return Status::Ok();
    return Error(key_node, "field \"" + (where.empty() ? "" : where + ".") + key +
                               "\" given twice" +
                               (it->second > 0 ? " (first on line " + std::to_string(it->second) + ")"
                                               : ""));
  }

  // Fails on any key of `map` not in `known`, or given twice.
  Status CheckKeys(const YAML::Node& map, const std::string& where,
                   const std::vector<std::string>& known) const {
    if (!map.IsMap()) return Error(map, where + ": must be a mapping of field: value");
    const std::set<std::string> allowed(known.begin(), known.end());
    std::map<std::string, int> seen;
    for (const auto& kv : map) {
      // as<std::string>() throws on a key that is a list or a mapping ("? [a]: 1").
      if (!kv.first.IsScalar()) {
        return Error(kv.first, (where.empty() ? "" : where + ": ") + "a field name must be a word");
      }
      const std::string key = kv.first.as<std::string>();
      GS_RETURN_IF_ERROR(CheckUnique(kv.first, key, where, seen));
      if (!allowed.count(key)) {
        std::string list;
        for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
        return Error(kv.first, "unknown field \"" + (where.empty() ? "" : where + ".") + key +
                                   "\" (known fields: " + list + ")");
      }
    }
    return Status::Ok();
  }

  StatusOr<std::string> Scalar(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) return Error(node, field + ": must be a single value");
    return node.Scalar();
  }

  StatusOr<int64_t> Int(const YAML::Node& node, const std::string& field) const {
    GS_ASSIGN_OR_RETURN(std::string text, Scalar(node, field));
    try {
      size_t used = 0;
      const long long v = std::stoll(text, &used);
      if (used != text.size()) throw std::invalid_argument(text);
      return static_cast<int64_t>(v);
    } catch (const std::exception&) {
      return Error(node, field + ": \"" + text + "\" is not an integer");
    }
  }

  StatusOr<double> Number(const YAML::Node& node, const std::string& field) const {
    GS_ASSIGN_OR_RETURN(std::string text, Scalar(node, field));
    try {
      size_t used = 0;
      const double v = std::stod(text, &used);
      // stod reads "nan" and "inf", which no table value can mean.
      if (used != text.size() || !std::isfinite(v)) throw std::invalid_argument(text);
      return v;
    } catch (const std::exception&) {
      return Error(node, field + ": \"" + text + "\" is not a number");
    }
  }

  StatusOr<bool> Bool(const YAML::Node& node, const std::string& field) const {
    GS_ASSIGN_OR_RETURN(std::string text, Scalar(node, field));
    if (text == "true" || text == "yes") return true;
    if (text == "false" || text == "no") return false;
    return Error(node, field + ": \"" + text + "\" is not true or false");
  }

  StatusOr<MiB> Size(const YAML::Node& node, const std::string& field) const {
    GS_ASSIGN_OR_RETURN(std::string text, Scalar(node, field));
    auto v = ParseSizeMiB(text, field);
    if (!v.ok()) return Error(node, v.status().message());
    return *v;
  }

  StatusOr<int64_t> Duration(const YAML::Node& node, const std::string& field) const {
    GS_ASSIGN_OR_RETURN(std::string text, Scalar(node, field));
    auto v = ParseDurationMs(text, field);
    if (!v.ok()) return Error(node, v.status().message());
    return *v;
  }

  // CPU as cores ("8", "0.5") or millicores ("500m").
  StatusOr<int64_t> Cpu(const YAML::Node& node, const std::string& field) const {
    GS_ASSIGN_OR_RETURN(std::string text, Scalar(node, field));
    auto milli = ParseCpuMilli(text, field);
    if (!milli.ok()) return Error(node, milli.status().message());
    return *milli;
  }

  StatusOr<std::map<std::string, std::string>> StringMap(const YAML::Node& node,
                                                         const std::string& field) const {
    if (!node.IsMap()) return Error(node, field + ": must be a mapping");
    std::map<std::string, std::string> out;
    std::map<std::string, int> seen;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) return Error(kv.first, field + ": a key must be a word");
      const std::string key = kv.first.as<std::string>();
      GS_RETURN_IF_ERROR(CheckUnique(kv.first, key, field, seen));
      GS_ASSIGN_OR_RETURN(out[key], Scalar(kv.second, field));
    }
    return out;
  }

  StatusOr<core::Toleration> Toleration(const YAML::Node& node) const {
    GS_RETURN_IF_ERROR(CheckKeys(node, "tolerations", {"key", "operator", "value", "effect"}));
    core::Toleration t;
    if (node["key"]) { GS_ASSIGN_OR_RETURN(t.key, Scalar(node["key"], "tolerations.key")); }
    if (node["value"]) { GS_ASSIGN_OR_RETURN(t.value, Scalar(node["value"], "tolerations.value")); }
    if (node["operator"]) {
      GS_ASSIGN_OR_RETURN(std::string op, Scalar(node["operator"], "tolerations.operator"));
      if (op != "Exists" && op != "Equal") {
        return Error(node["operator"], "tolerations.operator: \"" + op + "\" is not Exists or Equal");
      }
      t.exists = op == "Exists";
    }
    if (node["effect"]) {
      GS_ASSIGN_OR_RETURN(std::string e, Scalar(node["effect"], "tolerations.effect"));
      t.has_effect = true;
      auto effect = core::ParseTaintEffect(e, "tolerations.effect");
      if (!effect.ok()) return Error(node["effect"], effect.status().message());
      t.effect = *effect;
    }
    return t;
  }

  StatusOr<core::MemoryProfile> Profile(const YAML::Node& node, const std::string& where) const {
    GS_RETURN_IF_ERROR(CheckKeys(node, where, {"task_type", "model", "batch", "height", "width"}));
    core::MemoryProfile p;
    if (node["task_type"]) { GS_ASSIGN_OR_RETURN(p.task_type, Scalar(node["task_type"], where + ".task_type")); }
    if (!node["model"]) return Error(node, where + ".model: must be set");
    GS_ASSIGN_OR_RETURN(p.model, Scalar(node["model"], where + ".model"));
    if (node["batch"]) { GS_ASSIGN_OR_RETURN(p.batch, Int(node["batch"], where + ".batch")); }
    if (node["height"]) { GS_ASSIGN_OR_RETURN(p.height, Int(node["height"], where + ".height")); }
    if (node["width"]) { GS_ASSIGN_OR_RETURN(p.width, Int(node["width"], where + ".width")); }
    return p;
  }

 private:
  std::string source_;
};

StatusOr<YAML::Node> Load(std::string_view text, std::string_view source) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string(source) + ":" + std::to_string(e.mark.line + 1) +
                           ": not valid YAML: " + e.msg);
  }
}

Status ParseTaskFields(const Parser& p, const YAML::Node& doc, core::TaskSpec* s) {
  GS_RETURN_IF_ERROR(p.CheckKeys(doc, "",
                                 {"name", "gpus", "gpu_mem", "gpu_model", "cpu", "mem",
                                  "duration", "retries", "profile", "node_selector",
                                  "tolerations", "keep_pending", "command", "env", "time",
                                  "workdir", "heartbeat_timeout", "nodes", "gpus_per_node",
                                  "tasks_per_node", "priority", "preemptible", "grace",
                                  "signal", "gang_timeout", "export"}));
  if (doc["name"]) { GS_ASSIGN_OR_RETURN(s->name, p.Scalar(doc["name"], "name")); }
  if (doc["gpus"]) { GS_ASSIGN_OR_RETURN(s->gpus, p.Int(doc["gpus"], "gpus")); }
  if (doc["gpu_mem"]) {
    GS_ASSIGN_OR_RETURN(s->gpu_mem_mib, p.Size(doc["gpu_mem"], "gpu_mem"));
    if (s->gpu_mem_mib == 0) {  // the spec's 0 means "no share": a whole GPU or none
      return p.Error(doc["gpu_mem"], "gpu_mem: 0 is no memory; a GPU share needs more than 0 "
                                     "(leave gpu_mem out to ask for whole GPUs)");
    }
  }
  if (doc["gpu_model"]) { GS_ASSIGN_OR_RETURN(s->gpu_model, p.Scalar(doc["gpu_model"], "gpu_model")); }
  if (doc["cpu"]) { GS_ASSIGN_OR_RETURN(s->resources.cpu_milli, p.Cpu(doc["cpu"], "cpu")); }
  if (doc["mem"]) { GS_ASSIGN_OR_RETURN(s->resources.mem_mib, p.Size(doc["mem"], "mem")); }
  if (doc["duration"]) { GS_ASSIGN_OR_RETURN(s->duration_ms, p.Duration(doc["duration"], "duration")); }
  if (doc["time"]) { GS_ASSIGN_OR_RETURN(s->time_limit_ms, p.Duration(doc["time"], "time")); }
  if (doc["heartbeat_timeout"]) {
    GS_ASSIGN_OR_RETURN(s->heartbeat_timeout_ms,
                        p.Duration(doc["heartbeat_timeout"], "heartbeat_timeout"));
  }
  if (doc["workdir"]) { GS_ASSIGN_OR_RETURN(s->workdir, p.Scalar(doc["workdir"], "workdir")); }
  // A multi-node task: `gpus` is the total (Slurm's --gpus), `gpus_per_node` what each node
  // gives; the spec keeps GPUs per node.
  if (doc["nodes"]) { GS_ASSIGN_OR_RETURN(s->nodes, p.Int(doc["nodes"], "nodes")); }
  if (doc["gpus_per_node"]) {
    if (doc["gpus"]) {
      return p.Error(doc["gpus_per_node"], "gpus_per_node: give gpus or gpus_per_node, not both");
    }
    GS_ASSIGN_OR_RETURN(s->gpus, p.Int(doc["gpus_per_node"], "gpus_per_node"));
  } else if (doc["gpus"] && s->nodes > 1) {
    if (s->gpus % s->nodes != 0) {
      return p.Error(doc["gpus"], "gpus: " + std::to_string(s->gpus) +
                                      " GPUs do not split evenly over " +
                                      std::to_string(s->nodes) + " nodes (use gpus_per_node)");
    }
    s->gpus /= s->nodes;
  }
  if (doc["tasks_per_node"]) {
    GS_ASSIGN_OR_RETURN(s->tasks_per_node, p.Int(doc["tasks_per_node"], "tasks_per_node"));
  }
  if (doc["priority"]) {
    GS_ASSIGN_OR_RETURN(s->priority_class, p.Scalar(doc["priority"], "priority"));
  }
  if (doc["preemptible"]) {
    GS_ASSIGN_OR_RETURN(s->preemptible, p.Bool(doc["preemptible"], "preemptible"));
  }
  if (doc["grace"]) { GS_ASSIGN_OR_RETURN(s->grace_ms, p.Duration(doc["grace"], "grace")); }
  if (doc["signal"]) {  // issue 37: Slurm's --signal
    std::string text;
    GS_ASSIGN_OR_RETURN(text, p.Scalar(doc["signal"], "signal"));
    StatusOr<int> sig = core::ParseStopSignal(text, "signal");
    if (!sig.ok()) return p.Error(doc["signal"], sig.status().message());
    s->stop_signal = *sig;
  }
  if (doc["gang_timeout"]) {
    GS_ASSIGN_OR_RETURN(s->gang_timeout_ms, p.Duration(doc["gang_timeout"], "gang_timeout"));
  }
  if (doc["retries"]) { GS_ASSIGN_OR_RETURN(s->max_retries, p.Int(doc["retries"], "retries")); }
  if (doc["profile"]) { GS_ASSIGN_OR_RETURN(s->profile, p.Profile(doc["profile"], "profile")); }
  if (doc["node_selector"]) {
    GS_ASSIGN_OR_RETURN(s->node_selector, p.StringMap(doc["node_selector"], "node_selector"));
  }
  if (doc["env"]) {
    GS_ASSIGN_OR_RETURN(s->env, p.StringMap(doc["env"], "env"));
    if (Status own = core::CheckSubmittedEnv(*s); !own.ok()) {
      return p.Error(doc["env"], own.message());
    }
  }
  if (doc["keep_pending"]) {
    GS_ASSIGN_OR_RETURN(s->keep_pending_if_infeasible, p.Bool(doc["keep_pending"], "keep_pending"));
  }
  if (const YAML::Node tol = doc["tolerations"]) {
    if (!tol.IsSequence()) return p.Error(tol, "tolerations: must be a list");
    for (const auto& t : tol) {
      GS_ASSIGN_OR_RETURN(core::Toleration parsed, p.Toleration(t));
      s->tolerations.push_back(std::move(parsed));
    }
  }
  if (const YAML::Node cmd = doc["command"]) {
    if (cmd.IsScalar()) {
      if (cmd.Scalar().find_first_not_of(" \t\n") == std::string::npos) {
        return p.Error(cmd, "command: empty; write the shell command to run, or a list of words");
      }
      s->command = {"/bin/sh", "-c", cmd.Scalar()};
    } else if (cmd.IsSequence()) {
      for (const auto& arg : cmd) {
        GS_ASSIGN_OR_RETURN(std::string a, p.Scalar(arg, "command"));
        s->command.push_back(std::move(a));
      }
    } else {
      return p.Error(cmd, "command: must be a string or a list of strings");
    }
  }
  return Status::Ok();
}

// `export:` ALL | NONE | "A,B=1" | [ALL, "B=1,2"] (env_export.h).
StatusOr<EnvExport> ParseExport(const Parser& p, const YAML::Node& node) {
  std::vector<std::string> items;
  if (node.IsScalar()) {
    auto rule = ParseEnvExport(node.Scalar(), "export");
    if (!rule.ok()) return p.Error(node, rule.status().message());
    return rule;
  }
  if (!node.IsSequence()) return p.Error(node, "export: must be ALL, NONE or a list of VAR[=VALUE]");
  for (const auto& item : node) {
    GS_ASSIGN_OR_RETURN(std::string text, p.Scalar(item, "export"));
    items.push_back(std::move(text));
  }
  auto rule = ParseEnvExportItems(items, "export");
  if (!rule.ok()) return p.Error(node, rule.status().message());
  return rule;
}

}  // namespace

StatusOr<JobFile> ParseJobFileYaml(std::string_view text, std::string_view source) {
  GS_ASSIGN_OR_RETURN(YAML::Node doc, Load(text, source));
  const Parser p(source);
  if (!doc.IsMap()) return p.Error(doc, "a task spec must be a mapping of field: value");
  JobFile file;
  try {
    GS_RETURN_IF_ERROR(ParseTaskFields(p, doc, &file.spec));
    if (const YAML::Node e = doc["export"]) {
      GS_ASSIGN_OR_RETURN(file.export_env, ParseExport(p, e));
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return file;
}

StatusOr<core::TaskSpec> ParseTaskSpecYaml(std::string_view text, std::string_view source) {
  GS_ASSIGN_OR_RETURN(JobFile file, ParseJobFileYaml(text, source));
  return std::move(file.spec);
}

Status LoadMemoryTableYaml(std::string_view text, std::string_view source,
                           core::GpuMemoryTable* table) {
  GS_ASSIGN_OR_RETURN(YAML::Node doc, Load(text, source));
  const Parser p(source);
  GS_RETURN_IF_ERROR(p.CheckKeys(doc, "", {"rows", "formulas"}));
  core::GpuMemoryTable staged = *table;  // all or nothing
  try {
    if (const YAML::Node rows = doc["rows"]) {
      if (!rows.IsSequence()) return p.Error(rows, "rows: must be a list");
      for (const auto& row : rows) {
        GS_RETURN_IF_ERROR(p.CheckKeys(row, "rows", {"task_type", "model", "batch", "height", "width", "mib"}));
        YAML::Node profile_only = YAML::Clone(row);
        profile_only.remove("mib");
        GS_ASSIGN_OR_RETURN(core::MemoryProfile prof, p.Profile(profile_only, "rows"));
        if (!row["mib"]) return p.Error(row, "rows.mib: must be set");
        GS_ASSIGN_OR_RETURN(MiB mib, p.Size(row["mib"], "rows.mib"));
        Status s = staged.AddRow({prof, mib});
        if (!s.ok()) return p.Error(row, s.message());
      }
    }
    if (const YAML::Node formulas = doc["formulas"]) {
      if (!formulas.IsSequence()) return p.Error(formulas, "formulas: must be a list");
      for (const auto& f : formulas) {
        GS_RETURN_IF_ERROR(p.CheckKeys(f, "formulas", {"model", "base", "per_image", "ref_height", "ref_width"}));
        core::MemoryFormula formula;
        if (!f["model"]) return p.Error(f, "formulas.model: must be set");
        GS_ASSIGN_OR_RETURN(formula.model, p.Scalar(f["model"], "formulas.model"));
        if (f["base"]) { GS_ASSIGN_OR_RETURN(formula.base_mib, p.Size(f["base"], "formulas.base")); }
        if (f["per_image"]) { GS_ASSIGN_OR_RETURN(formula.per_image_mib, p.Number(f["per_image"], "formulas.per_image")); }
        if (f["ref_height"]) { GS_ASSIGN_OR_RETURN(formula.ref_height, p.Int(f["ref_height"], "formulas.ref_height")); }
        if (f["ref_width"]) { GS_ASSIGN_OR_RETURN(formula.ref_width, p.Int(f["ref_width"], "formulas.ref_width")); }
        Status s = staged.AddFormula(formula);
        if (!s.ok()) return p.Error(f, s.message());
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  *table = std::move(staged);
  return Status::Ok();
}

}  // namespace gpusched::spec
