#include "cli/ledger.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <fstream>
#include <sstream>

namespace gpusched::cli {

namespace fs = std::filesystem;

std::vector<std::string> LedgerTaskCommand(const fs::path& ledger, int64_t sleep_ms) {
  const std::string fields =
      "$GPUSCHED_ATTEMPT $GPUSCHED_NODE $CUDA_VISIBLE_DEVICES $GPUSCHED_GPU_MEM_MIB";
  const std::string file = ledger.string() + "/$GPUSCHED_TASK_ID";
  const std::string script =
      "trap 'echo \"kill " + fields + " $(date +%s%N)\" >> " + file + "; exit 143' TERM; " +
      "echo \"start " + fields + " $(date +%s%N)\" >> " + file + "; sleep " +
      std::to_string(sleep_ms / 1000.0) + " & wait $!; echo \"end " + fields +
      " $(date +%s%N)\" >> " + file;
  return {"sh", "-c", script};
}

LedgerCheck CheckLedger(const fs::path& ledger, MiB gpu_mib) {
  LedgerCheck out;
  struct Event {
    int64_t ns;
    int delta;  // +1 start, -1 end or kill
    MiB mib;
  };
  std::map<std::string, std::vector<Event>> per_gpu;  // "node/gpu"
  for (const auto& entry : fs::directory_iterator(ledger)) {
    const uint64_t task = std::stoull(entry.path().filename().string());
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string kind, node, gpus, shares;
      int64_t attempt = 0, ns = 0;
      if (!(f >> kind >> attempt >> node >> gpus >> shares >> ns)) continue;
      if (kind == "end") ++out.completions[task];
      std::istringstream g(gpus), m(shares);
      std::string gpu, mib;
      while (std::getline(g, gpu, ',') && std::getline(m, mib, ',')) {
        per_gpu[node + "/" + gpu].push_back({ns, kind == "start" ? 1 : -1, std::stoll(mib)});
      }
    }
  }
  for (const auto& [task, n] : out.completions) out.completed_twice += n > 1;
  for (auto& [gpu, events] : per_gpu) {
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      return a.ns != b.ns ? a.ns < b.ns : a.delta < b.delta;  // ends first at a tie
    });
    MiB used = 0;
    for (const Event& e : events) {
      used += e.delta * e.mib;
      if (used > gpu_mib) ++out.overcommits;
    }
  }
  return out;
}

namespace {
bool Terminal(const std::string& s) { return s == "succeeded" || s == "failed" || s == "cancelled"; }
}  // namespace

std::map<uint64_t, std::string> WaitUntilTerminal(
    const std::set<uint64_t>& acked,
    const std::function<StatusOr<std::vector<::gpusched::v1::Task>>()>& list, int64_t timeout_ms) {
  std::map<uint64_t, std::string> state;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    auto all = list();
    if (all.ok()) {
      state.clear();
      for (const auto& t : *all) state[t.id()] = t.state();
      const bool done = std::all_of(acked.begin(), acked.end(), [&](uint64_t id) {
        auto it = state.find(id);
        return it != state.end() && Terminal(it->second);
      });
      if (done) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return state;
}

Outcomes CountOutcomes(const std::set<uint64_t>& acked, const std::map<uint64_t, std::string>& state) {
  Outcomes o;
  for (uint64_t id : acked) {
    auto it = state.find(id);
    const std::string st = it == state.end() ? "" : it->second;
    if (st == "succeeded") {
      ++o.succeeded;
    } else if (Terminal(st)) {
      ++o.failed;
    } else {
      ++o.lost;
      o.lost_states[id] = st.empty() ? "absent" : st;
    }
  }
  return o;
}

nlohmann::json LostTasksJson(const Outcomes& o) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [id, state] : o.lost_states) j[std::to_string(id)] = state;
  return j;
}

}  // namespace gpusched::cli
