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

int64_t ElapsedMs(const ::gpusched::v1::Task& t, int64_t now_ms) {
  if (t.started_ms() <= 0) return 0;
  const int64_t end = t.finished_ms() >= t.started_ms() ? t.finished_ms() : now_ms;
  return std::max<int64_t>(0, end - t.started_ms());
}

std::string DescribeRequest(const ::gpusched::v1::TaskSpec& s) {
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (s.gpus() > 0 || s.gpu_mem_mib() > 0) {
    const int64_t n = std::max<int64_t>(1, s.gpus());
    std::string gpus = std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
    gpus += s.gpu_mem_mib() > 0 ? " x " + FormatSizeMiB(s.gpu_mem_mib()) : " (whole)";
    add(gpus);
  }
  if (s.cpu_milli() > 0) {
    add(s.cpu_milli() % 1000 == 0 ? std::to_string(s.cpu_milli() / 1000) + " CPU"
                                  : std::to_string(s.cpu_milli()) + "m CPU");
  }
  if (s.mem_mib() > 0) add(FormatSizeMiB(s.mem_mib()) + " RAM");
  if (s.has_duration_ms()) add("expected " + FormatDurationMs(s.duration_ms()));
  if (s.has_time_limit_ms()) add(FormatDurationMs(s.time_limit_ms()) + " limit");
  if (s.has_max_retries()) add(std::to_string(s.max_retries()) + " retries");
  return out.empty() ? "no GPU" : out;
}

nlohmann::json TaskJson(const ::gpusched::v1::Task& t, int64_t now_ms) {
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
                      {"submitted_ms", t.submitted_ms()},
                      {"started_ms", t.started_ms()},
                      {"finished_ms", t.finished_ms()},
                      {"command", std::vector<std::string>(t.spec().command().begin(),
                                                           t.spec().command().end())}};
  if (t.has_exit_code()) j["exit_code"] = t.exit_code();
  const auto& s = t.spec();
  auto optional = [](bool has, int64_t v) { return has ? nlohmann::json(v) : nlohmann::json(); };
  j["request"] = {{"gpus", s.gpus()},
                  {"gpu_mem_mib", s.gpu_mem_mib()},
                  {"cpu_milli", s.cpu_milli()},
                  {"mem_mib", s.mem_mib()},
                  {"duration_ms", optional(s.has_duration_ms(), s.duration_ms())},
                  {"time_limit_ms", optional(s.has_time_limit_ms(), s.time_limit_ms())},
                  {"retries", optional(s.has_max_retries(), s.max_retries())},
                  {"keep_pending", s.keep_pending()}};
  j["workdir"] = s.workdir();
  j["elapsed_ms"] = ElapsedMs(t, now_ms);
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
                    {"tasks", g.tasks()}});
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
