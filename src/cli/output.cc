#include "cli/output.h"

#include <algorithm>
#include <ostream>

#include "base/units.h"

namespace gpusched::cli {

std::string JoinInts(const google::protobuf::RepeatedField<int32_t>& v) {
  std::string s;
  for (int i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v.Get(i));
  return s;
}

nlohmann::json TaskJson(const ::gpusched::v1::Task& t) {
  nlohmann::json j = {{"id", t.id()},
                      {"name", t.name()},
                      {"state", t.state()},
                      {"node", t.node()},
                      {"gpus", std::vector<int>(t.gpus().begin(), t.gpus().end())},
                      {"exit_code", nullptr},
                      {"attempts", t.attempts()},
                      {"reason", t.reason()},
                      {"fail_cnt", t.fail_cnt()},
                      {"pt", t.pt()},
                      {"gpu_mem_mib", t.gpu_mem_need_mib()},
                      {"mem_source", t.mem_source()},
                      {"topology_rule", t.topology_rule()},
                      {"submitted_ms", t.submitted_ms()},
                      {"started_ms", t.started_ms()},
                      {"finished_ms", t.finished_ms()},
                      {"command", std::vector<std::string>(t.spec().command().begin(),
                                                           t.spec().command().end())}};
  if (t.has_exit_code()) j["exit_code"] = t.exit_code();
  // A running task's GPU use from its heartbeats (CN109992422A claim 7); null = not reported.
  j["gpu_util"] = t.has_gpu_util() ? nlohmann::json(t.gpu_util()) : nlohmann::json(nullptr);
  j["gpu_mem_used_mib"] =
      t.has_gpu_mem_used_mib() ? nlohmann::json(t.gpu_mem_used_mib()) : nlohmann::json(nullptr);
  j["idle_since_ms"] = t.idle_since_ms();
  j["idle"] = t.idle();
  if (t.history_size() > 0) {
    nlohmann::json h = nlohmann::json::array();
    for (const auto& x : t.history()) {
      h.push_back({{"at_ms", x.at_ms()}, {"state", x.state()}, {"reason", x.reason()}});
    }
    j["history"] = h;
  }
  return j;
}

nlohmann::json NodeJson(const ::gpusched::v1::Node& n) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : n.gpus()) {
    gpus.push_back({{"index", g.index()},
                    {"model", g.model()},
                    {"total_mib", g.total_mib()},
                    {"allocated_mib", g.allocated_mib()},
                    {"reported_free_mib", g.reported_free_mib()},
                    {"tasks", g.tasks()},
                    {"healthy", !g.unhealthy()},
                    {"last_error", g.last_error()}});
  }
  return {{"name", n.name()},           {"address", n.address()},
          {"connected", n.connected()}, {"reachable", n.reachable()},
          {"available", n.available()}, {"cordoned", n.cordoned()},
          {"draining", n.draining()},   {"running_tasks", n.running_tasks()},
          {"gpus", gpus}};
}

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

std::string Age(int64_t at_ms, int64_t now_ms) {
  if (at_ms <= 0) return "-";
  return FormatDurationMs(std::max<int64_t>(0, now_ms - at_ms)) + " ago";
}

}  // namespace gpusched::cli
