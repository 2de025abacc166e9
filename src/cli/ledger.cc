#include "cli/ledger.h"

#include <algorithm>
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

}  // namespace gpusched::cli
