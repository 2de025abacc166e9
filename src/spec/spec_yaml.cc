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
#include "spec/profile_flag.h"

namespace gpusched::spec {
namespace {

// `node` on one line for an error message, cut to a readable length.
std::string Flow(const YAML::Node& node) {
  YAML::Emitter out;
  out << YAML::Flow << node;
  std::string text = out.c_str();
  return text.size() > 64 ? text.substr(0, 64) + "..." : text;
}

// Parsing context: the source name for error messages.
class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Status Error(const YAML::Node& node, const std::string& message) const {
    // A document built in memory (the REST body) has no lines, and "" names no source.
    const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    if (source_.empty()) return InvalidArgument(message);
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
    if (!node.IsScalar()) return Error(node, field + ": must be a single value, got " + Flow(node));
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

// `command:` a string runs under /bin/sh -c; a list runs as is.
Status ParseCommand(const Parser& p, const YAML::Node& cmd, core::TaskSpec* s) {
  if (cmd.IsScalar()) {
    if (cmd.Scalar().find_first_not_of(" \t\n") == std::string::npos) {
      return p.Error(cmd, "command: empty; write the shell command to run, or a list of words");
    }
    s->command = {"/bin/sh", "-c", cmd.Scalar()};
    return Status::Ok();
  }
  if (!cmd.IsSequence()) return p.Error(cmd, "command: must be a string or a list of strings");
  s->command.clear();
  for (const auto& arg : cmd) {
    GS_ASSIGN_OR_RETURN(std::string a, p.Scalar(arg, "command"));
    s->command.push_back(std::move(a));
  }
  return Status::Ok();
}

// `tolerations:` a list of {key, operator, value, effect}, or of `--toleration` strings
// ("dedicated=infer:NoSchedule", "spot", "*").
Status ParseTolerations(const Parser& p, const YAML::Node& tol, core::TaskSpec* s) {
  if (!tol.IsSequence()) return p.Error(tol, "tolerations: must be a list");
  for (const auto& t : tol) {
    if (t.IsScalar()) {
      const std::string field = "tolerations[" + std::to_string(s->tolerations.size()) + "]";
      StatusOr<core::Toleration> parsed = core::ParseToleration(t.Scalar(), field);
      if (!parsed.ok()) return p.Error(t, parsed.status().message());
      s->tolerations.push_back(*std::move(parsed));
      continue;
    }
    GS_ASSIGN_OR_RETURN(core::Toleration parsed, p.Toleration(t));
    s->tolerations.push_back(std::move(parsed));
  }
  return Status::Ok();
}

// `profile:` {task_type, model, batch, height, width}, or the `--profile` string
// ("resnet50,batch=32").
Status ParseProfile(const Parser& p, const YAML::Node& v, core::TaskSpec* s) {
  if (!v.IsScalar()) {
    GS_ASSIGN_OR_RETURN(s->profile, p.Profile(v, "profile"));
    return Status::Ok();
  }
  StatusOr<core::MemoryProfile> parsed = ParseProfileFlag(v.Scalar(), "profile");
  if (!parsed.ok()) return p.Error(v, parsed.status().message());
  s->profile = *parsed;
  return Status::Ok();
}

// `node_selector:` labels the node must have, checked as `--selector` checks them.
Status ParseSelector(const Parser& p, const YAML::Node& v, core::TaskSpec* s) {
  GS_ASSIGN_OR_RETURN(s->node_selector, p.StringMap(v, "node_selector"));
  for (const auto& [key, value] : s->node_selector) {
    Status ok = core::ValidateLabel(key, value, "node_selector", key + "=" + value);
    if (!ok.ok()) return p.Error(v, ok.message());
  }
  return Status::Ok();
}

Status ParseEnv(const Parser& p, const YAML::Node& v, core::TaskSpec* s) {
  GS_ASSIGN_OR_RETURN(s->env, p.StringMap(v, "env"));
  if (Status own = core::CheckSubmittedEnv(*s); !own.ok()) return p.Error(v, own.message());
  return Status::Ok();
}

Status ParseGpuMem(const Parser& p, const YAML::Node& v, core::TaskSpec* s) {
  GS_ASSIGN_OR_RETURN(s->gpu_mem_mib, p.Size(v, "gpu_mem"));
  if (s->gpu_mem_mib == 0) {  // the spec's 0 means "no share": a whole GPU or none
    return p.Error(v, "gpu_mem: \"" + v.Scalar() + "\" is no memory; a GPU share needs more "
                      "than 0 (leave gpu_mem out to ask for whole GPUs)");
  }
  return Status::Ok();
}

Status ParseSignal(const Parser& p, const YAML::Node& v, core::TaskSpec* s) {  // issue 37
  GS_ASSIGN_OR_RETURN(std::string text, p.Scalar(v, "signal"));
  StatusOr<int> sig = core::ParseStopSignal(text, "signal");
  if (!sig.ok()) return p.Error(v, sig.status().message());
  s->stop_signal = *sig;
  return Status::Ok();
}

StatusOr<EnvExport> ParseExport(const Parser& p, const YAML::Node& node);

// One field of a job: its name (docs/job-spec.md's table) and how its value is read. The one
// schema of the YAML file and the REST body: a field added here is added to both.
struct JobField {
  const char* name;
  Status (*parse)(const Parser& p, const YAML::Node& value, JobFile* f);
};

// A field read into `lhs` by `read` (p: the Parser, v: the value, s: the spec, f: the file).
#define GS_FIELD(name, lhs, read)                                          \
  JobField {                                                               \
    name, [](const Parser& p, const YAML::Node& v, JobFile* f) -> Status { \
      [[maybe_unused]] core::TaskSpec* s = &f->spec;                       \
      GS_ASSIGN_OR_RETURN(lhs, read);                                      \
      return Status::Ok();                                                 \
    }                                                                      \
  }
// A field read by `fn(p, v, spec)`.
#define GS_CALL(name, fn)                                        \
  JobField {                                                     \
    name, [](const Parser& p, const YAML::Node& v, JobFile* f) { \
      return fn(p, v, &f->spec);                                 \
    }                                                            \
  }

// In the order the fields are read and listed: `gpus` before `gpus_per_node` (which then
// overrides it; SplitGpusOverNodes sorts the two out).
const JobField kJobFields[] = {
    GS_FIELD("name", s->name, p.Scalar(v, "name")),
    GS_FIELD("gpus", s->gpus, p.Int(v, "gpus")),
    GS_CALL("gpu_mem", ParseGpuMem),
    GS_FIELD("gpu_model", s->gpu_model, p.Scalar(v, "gpu_model")),
    GS_FIELD("cpu", s->resources.cpu_milli, p.Cpu(v, "cpu")),
    GS_FIELD("mem", s->resources.mem_mib, p.Size(v, "mem")),
    GS_FIELD("duration", s->duration_ms, p.Duration(v, "duration")),
    GS_FIELD("retries", s->max_retries, p.Int(v, "retries")),
    GS_CALL("profile", ParseProfile),
    GS_CALL("node_selector", ParseSelector),
    GS_CALL("tolerations", ParseTolerations),
    GS_FIELD("keep_pending", s->keep_pending_if_infeasible, p.Bool(v, "keep_pending")),
    GS_CALL("command", ParseCommand),
    GS_CALL("env", ParseEnv),
    GS_FIELD("time", s->time_limit_ms, p.Duration(v, "time")),
    GS_FIELD("workdir", s->workdir, p.Scalar(v, "workdir")),
    GS_FIELD("heartbeat_timeout", s->heartbeat_timeout_ms, p.Duration(v, "heartbeat_timeout")),
    GS_FIELD("nodes", s->nodes, p.Int(v, "nodes")),
    GS_FIELD("gpus_per_node", s->gpus, p.Int(v, "gpus_per_node")),
    GS_FIELD("tasks_per_node", s->tasks_per_node, p.Int(v, "tasks_per_node")),
    GS_FIELD("priority", s->priority_class, p.Scalar(v, "priority")),
    GS_FIELD("preemptible", s->preemptible, p.Bool(v, "preemptible")),
    GS_FIELD("grace", s->grace_ms, p.Duration(v, "grace")),
    GS_CALL("signal", ParseSignal),
    GS_FIELD("gang_timeout", s->gang_timeout_ms, p.Duration(v, "gang_timeout")),
    GS_FIELD("export", f->export_env, ParseExport(p, v)),
};
#undef GS_FIELD
#undef GS_CALL

// A multi-node task: `gpus` is the total (Slurm's --gpus), `gpus_per_node` what each node
// gives; the spec keeps GPUs per node.
Status SplitGpusOverNodes(const Parser& p, const YAML::Node& doc, core::TaskSpec* s) {
  if (doc["gpus_per_node"]) {
    if (doc["gpus"]) {
      return p.Error(doc["gpus_per_node"], "gpus_per_node: give gpus or gpus_per_node, not both");
    }
    return Status::Ok();
  }
  if (!doc["gpus"] || s->nodes <= 1) return Status::Ok();
  if (s->gpus % s->nodes != 0) {
    return p.Error(doc["gpus"], "gpus: " + std::to_string(s->gpus) +
                                    " GPUs do not split evenly over " +
                                    std::to_string(s->nodes) + " nodes (use gpus_per_node)");
  }
  s->gpus /= s->nodes;
  return Status::Ok();
}

Status ParseFields(const Parser& p, const YAML::Node& doc, JobFile* file) {
  GS_RETURN_IF_ERROR(p.CheckKeys(doc, "", JobFileFields()));
  for (const JobField& field : kJobFields) {
    if (const YAML::Node v = doc[field.name]) GS_RETURN_IF_ERROR(field.parse(p, v, file));
  }
  return SplitGpusOverNodes(p, doc, &file->spec);
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

const std::vector<std::string>& JobFileFields() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const JobField& f : kJobFields) out.emplace_back(f.name);
    return out;
  }();
  return names;
}

StatusOr<JobFile> ParseJobFileNode(const YAML::Node& doc, std::string_view source) {
  const Parser p(source);
  if (!doc.IsMap()) return p.Error(doc, "a task spec must be a mapping of field: value");
  JobFile file;
  try {
    GS_RETURN_IF_ERROR(ParseFields(p, doc, &file));
  } catch (const YAML::Exception& e) {
    if (source.empty()) return InvalidArgument(e.msg);
    return InvalidArgument(std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": " +
                           e.msg);
  }
  return file;
}

StatusOr<JobFile> ParseJobFileYaml(std::string_view text, std::string_view source) {
  GS_ASSIGN_OR_RETURN(YAML::Node doc, Load(text, source));
  return ParseJobFileNode(doc, source);
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
