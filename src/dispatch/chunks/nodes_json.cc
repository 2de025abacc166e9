// ParseNodesJson (stage_plan.h): the executors of the gpusched server's REST nodes list. Input
// from the network: every field is type-checked, and no exception leaves this file.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>

#include "dispatch/chunks/stage_plan.h"

namespace gpusched::chunks {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxMiB = int64_t{1} << 40;  // beyond any GPU; keeps MiB -> bytes in range

Status Bad(const std::string& field, const std::string& why) {
  return InvalidArgument(field + ": " + why);
}

// A non-negative MiB count at j[key], or (`fallback`) total_mib - allocated_mib.
StatusOr<int64_t> FreeMiB(const Json& g, const std::string& at) {
  if (g.contains("free_mib")) {
    const Json& v = g["free_mib"];
    if (!v.is_number_integer()) return Bad(at + ".free_mib", "must be an integer");
    const int64_t mib = v.get<int64_t>();
    if (mib < 0 || mib > kMaxMiB) return Bad(at + ".free_mib", "out of range");
    return mib;
  }
  for (const char* key : {"total_mib", "allocated_mib"}) {
    if (!g.contains(key) || !g[key].is_number_integer()) {
      return Bad(at + ".free_mib", std::string("missing, and no integer ") + key);
    }
  }
  const int64_t total = g["total_mib"].get<int64_t>(), used = g["allocated_mib"].get<int64_t>();
  if (total < 0 || used < 0 || total > kMaxMiB || used > kMaxMiB) {
    return Bad(at + ".total_mib", "out of range");
  }
  return std::max<int64_t>(0, total - used);
}

bool FlagOr(const Json& j, const char* key, bool fallback) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

StatusOr<ExecutorOffer> NodeOf(const Json& n, const std::string& at) {
  if (!n.is_object()) return Bad(at, "must be an object");
  if (!n.contains("name") || !n["name"].is_string() || n["name"].get<std::string>().empty()) {
    return Bad(at + ".name", "must be a non-empty string");
  }
  ExecutorOffer e;
  e.name = e.node = n["name"].get<std::string>();
  if (n.contains("free_cpus")) {
    const Json& c = n["free_cpus"];
    if (!c.is_number_integer() || c.get<int64_t>() < 0 || c.get<int64_t>() > INT32_MAX) {
      return Bad(at + ".free_cpus", "must be an integer in [0, 2^31)");
    }
    e.free_cpus = static_cast<int>(c.get<int64_t>());
  }
  if (!n.contains("gpus") || !n["gpus"].is_array()) return Bad(at + ".gpus", "must be an array");
  for (size_t i = 0; i < n["gpus"].size(); ++i) {
    const Json& g = n["gpus"][i];
    const std::string gat = at + ".gpus[" + std::to_string(i) + "]";
    if (!g.is_object()) return Bad(gat, "must be an object");
    GS_ASSIGN_OR_RETURN(const int64_t mib, FreeMiB(g, gat));
    // An unhealthy GPU runs nothing: it offers no memory.
    e.gpu_free_bytes.push_back(FlagOr(g, "healthy", true) ? mib * 1024 * 1024 : 0);
  }
  return e;
}

}  // namespace

StatusOr<std::vector<ExecutorOffer>> ParseNodesJson(std::string_view json) {
  const Json doc = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Bad("nodes", "not valid JSON");
  if (!doc.is_object() || !doc.contains("nodes") || !doc["nodes"].is_array()) {
    return Bad("nodes", "must be an array under the key \"nodes\"");
  }
  std::vector<ExecutorOffer> executors;
  for (size_t i = 0; i < doc["nodes"].size(); ++i) {
    const std::string at = "nodes[" + std::to_string(i) + "]";
    GS_ASSIGN_OR_RETURN(ExecutorOffer e, NodeOf(doc["nodes"][i], at));
    if (!FlagOr(doc["nodes"][i], "available", true)) continue;  // cordoned, lost, draining
    executors.push_back(std::move(e));
  }
  return executors;
}

}  // namespace gpusched::chunks
