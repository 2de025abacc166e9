#include "extender/protocol.h"

#include <algorithm>

#include "extender/json_writer.h"

namespace gpusched::extender {
namespace {

std::string Shown(JsonValue v) {
  const std::string_view raw = v.raw();
  return raw.size() <= 40 ? std::string(raw) : std::string(raw.substr(0, 40)) + "...";
}

Status FieldError(std::string_view what, const std::string& field, const std::string& message) {
  return InvalidArgument(std::string(what) + ": " + field + ": " + message);
}

// A protocol string field: absent/null reads as "" (Go's zero value); another type is an error.
StatusOr<std::string> StringField(JsonValue parent, std::string_view key, std::string_view what) {
  const JsonValue v = parent.GetFold(key);
  if (v.is_null()) return std::string();
  auto s = v.String();
  if (!s) return FieldError(what, std::string(key), "expected a string, got " + Shown(v));
  return std::move(*s);
}

StatusOr<KubePod> ParsePodField(JsonValue root, std::string_view what) {
  const JsonValue pod = root.GetFold("Pod");
  if (pod.is_null()) return FieldError(what, "Pod", "missing (kube-scheduler always sends it)");
  auto parsed = ParsePod(pod);
  if (!parsed.ok()) return FieldError(what, "Pod", parsed.status().message());
  return parsed;
}

StatusOr<int64_t> IntField(JsonValue parent, std::string_view key, const std::string& field,
                           std::string_view what) {
  const JsonValue v = parent.GetFold(key);
  if (v.is_null()) return int64_t{0};
  auto i = v.Int();
  if (!i) return FieldError(what, field, "expected an integer, got " + Shown(v));
  return *i;
}

// The victims of one node: UIDs from MetaVictims, or from full Pod objects (Victims).
StatusOr<VictimSet> ParseVictims(const std::string& node, JsonValue victims, bool meta,
                                 std::string_view what) {
  const std::string base = (meta ? "NodeNameToMetaVictims[\"" : "NodeNameToVictims[\"") + node +
                           "\"]";
  if (!victims.is_object()) return FieldError(what, base, "expected an object, got " + Shown(victims));
  VictimSet set;
  set.node = node;
  GS_ASSIGN_OR_RETURN(set.pdb_violations,
                      IntField(victims, "NumPDBViolations", base + ".NumPDBViolations", what));
  Status error;
  size_t i = 0;
  victims.GetFold("Pods").ForEachItem([&](JsonValue pod) {
    const std::string field = base + ".Pods[" + std::to_string(i++) + "]";
    std::string uid;
    if (meta) {
      auto s = StringField(pod, "UID", what);
      if (!s.ok()) {
        error = FieldError(what, field, s.status().message());
        return false;
      }
      uid = *s;
    } else {
      auto p = ParsePod(pod);
      if (!p.ok()) {
        error = FieldError(what, field, p.status().message());
        return false;
      }
      uid = p->uid;
    }
    if (uid.empty()) {
      error = FieldError(what, field, "has no UID");
      return false;
    }
    set.victim_uids.push_back(std::move(uid));
    return true;
  });
  if (!error.ok()) return error;
  return set;
}

void WriteNameMap(JsonWriter& w, std::string_view key,
                  const std::map<std::string, std::string>& m) {
  w.Key(key);
  if (m.empty()) {
    w.Null();
    return;
  }
  w.BeginObject();
  for (const auto& [node, reason] : m) w.Key(node).String(reason);
  w.EndObject();
}

}  // namespace

StatusOr<ExtenderArgs> ParseExtenderArgs(const JsonDoc& doc, std::string_view what) {
  const JsonValue root = doc.root();
  if (!root.is_object()) return InvalidArgument(std::string(what) + ": expected a JSON object");
  ExtenderArgs args;
  GS_ASSIGN_OR_RETURN(args.pod, ParsePodField(root, what));
  const JsonValue nodes = root.GetFold("Nodes");
  const JsonValue names = root.GetFold("NodeNames");
  if (!nodes.is_null()) {
    args.node_list = true;
    const JsonValue items = nodes.GetFold("items");
    if (!items.is_null() && !items.is_array()) {
      return FieldError(what, "Nodes.items", "expected an array, got " + Shown(items));
    }
    ParseNodeOptions options;
    options.keep_labels = !args.pod.node_selector.empty();
    args.nodes.reserve(items.size());
    Status error;
    items.ForEachItem([&](JsonValue item) {
      auto node = ParseNode(item, options);
      if (!node.ok()) {
        error = FieldError(what, "Nodes.items[" + std::to_string(args.nodes.size()) + "]",
                           node.status().message());
        return false;
      }
      args.names.push_back(node->name);
      args.nodes.push_back(std::move(*node));
      args.node_json.push_back(item.raw());
      return true;
    });
    if (!error.ok()) return error;
  } else if (!names.is_null()) {
    if (!names.is_array()) {
      return FieldError(what, "NodeNames", "expected an array, got " + Shown(names));
    }
    Status error;
    names.ForEachItem([&](JsonValue v) {
      auto s = v.String();
      if (!s) {
        error = FieldError(what, "NodeNames[" + std::to_string(args.names.size()) + "]",
                           "expected a string, got " + Shown(v));
        return false;
      }
      args.names.push_back(std::move(*s));
      return true;
    });
    if (!error.ok()) return error;
  } else {
    return InvalidArgument(std::string(what) +
                           ": neither Nodes nor NodeNames is set (no candidate nodes)");
  }
  return args;
}

StatusOr<BindingArgs> ParseBindingArgs(const JsonDoc& doc) {
  constexpr std::string_view kWhat = "bind request";
  const JsonValue root = doc.root();
  if (!root.is_object()) return InvalidArgument("bind request: expected a JSON object");
  BindingArgs a;
  GS_ASSIGN_OR_RETURN(a.pod_name, StringField(root, "PodName", kWhat));
  GS_ASSIGN_OR_RETURN(a.pod_namespace, StringField(root, "PodNamespace", kWhat));
  GS_ASSIGN_OR_RETURN(a.pod_uid, StringField(root, "PodUID", kWhat));
  GS_ASSIGN_OR_RETURN(a.node, StringField(root, "Node", kWhat));
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"PodName", &a.pod_name},
                                     {"PodNamespace", &a.pod_namespace},
                                     {"Node", &a.node}}) {
    if (value->empty()) return FieldError(kWhat, field, "missing or empty");
  }
  return a;
}

StatusOr<PreemptionArgs> ParsePreemptionArgs(const JsonDoc& doc) {
  constexpr std::string_view kWhat = "preempt request";
  const JsonValue root = doc.root();
  if (!root.is_object()) return InvalidArgument("preempt request: expected a JSON object");
  PreemptionArgs a;
  GS_ASSIGN_OR_RETURN(a.pod, ParsePodField(root, kWhat));
  JsonValue map = root.GetFold("NodeNameToMetaVictims");
  bool meta = true;
  if (map.is_null()) {
    map = root.GetFold("NodeNameToVictims");
    meta = false;
  }
  if (!map.is_null() && !map.is_object()) {
    return FieldError(kWhat, meta ? "NodeNameToMetaVictims" : "NodeNameToVictims",
                      "expected an object, got " + Shown(map));
  }
  Status error;
  map.ForEachMember([&](std::string_view node, JsonValue victims) {
    auto set = ParseVictims(std::string(node), victims, meta, kWhat);
    if (!set.ok()) {
      error = set.status();
      return false;
    }
    a.proposals.push_back(std::move(*set));
    return true;
  });
  if (!error.ok()) return error;
  std::sort(a.proposals.begin(), a.proposals.end(),
            [](const VictimSet& x, const VictimSet& y) { return x.node < y.node; });
  return a;
}

std::string WriteFilterResult(const FilterResult& r) {
  JsonWriter w;
  size_t raw_bytes = 0;
  for (std::string_view j : r.passed_json) raw_bytes += j.size() + 1;
  w.Reserve(raw_bytes + 64 * (r.passed.size() + r.failed.size() + r.unresolvable.size()) + 128);
  w.BeginObject().Key("Nodes");
  if (r.node_list) {
    w.BeginObject().Key("metadata").BeginObject().EndObject().Key("items").BeginArray();
    for (std::string_view j : r.passed_json) w.Raw(j);
    w.EndArray().EndObject();
  } else {
    w.Null();
  }
  w.Key("NodeNames").BeginArray();
  for (const std::string& name : r.passed) w.String(name);
  w.EndArray();
  WriteNameMap(w, "FailedNodes", r.failed);
  WriteNameMap(w, "FailedAndUnresolvableNodes", r.unresolvable);
  w.Key("Error").String("").EndObject();
  return w.Take();
}

std::string WriteFilterError(std::string_view error) {
  JsonWriter w;
  w.BeginObject()
      .Key("Nodes").Null()
      .Key("NodeNames").Null()
      .Key("FailedNodes").Null()
      .Key("FailedAndUnresolvableNodes").Null()
      .Key("Error").String(error)
      .EndObject();
  return w.Take();
}

std::string WritePriorities(const std::vector<HostScore>& scores) {
  JsonWriter w;
  w.Reserve(40 * scores.size() + 2);
  w.BeginArray();
  for (const HostScore& s : scores) {
    w.BeginObject().Key("Host").String(s.host).Key("Score").Int(s.score).EndObject();
  }
  w.EndArray();
  return w.Take();
}

std::string WriteBindingResult(std::string_view error) {
  JsonWriter w;
  w.BeginObject().Key("Error").String(error).EndObject();
  return w.Take();
}

std::string WritePreemptionResult(const std::vector<VictimSet>& victims, std::string_view error) {
  std::vector<const VictimSet*> sorted;
  for (const VictimSet& v : victims) sorted.push_back(&v);
  std::sort(sorted.begin(), sorted.end(),
            [](const VictimSet* a, const VictimSet* b) { return a->node < b->node; });
  JsonWriter w;
  w.BeginObject().Key("NodeNameToMetaVictims").BeginObject();
  for (const VictimSet* v : sorted) {
    w.Key(v->node).BeginObject().Key("Pods").BeginArray();
    for (const std::string& uid : v->victim_uids) w.BeginObject().Key("UID").String(uid).EndObject();
    w.EndArray().Key("NumPDBViolations").Int(v->pdb_violations).EndObject();
  }
  w.EndObject();
  if (!error.empty()) w.Key("Error").String(error);
  w.EndObject();
  return w.Take();
}

}  // namespace gpusched::extender
