// The /proc texts the agent reads to see whether a task is hung (agent/executor_status.h):
// /proc/PID/stat (a task chooses its comm, which may hold spaces and parentheses) and
// /proc/PID/environ (the task's own environment). A parsed stat has a positive group; a parsed
// heartbeat file has a path and a positive timeout, and comes from the variables' own text.
// Also the launcher's split of CUDA_VISIBLE_DEVICES over a node's processes
// (agent/rank_launcher.h): the slices, joined again, are the list; each fits its buffer.

#include <string.h>

#include <string>

#include "agent/executor_status.h"
#include "agent/rank_launcher.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  const std::string_view text = fuzz::Text(data, size);
  const std::string shown(text);

  if (auto s = agent::ParseProcStat(text)) {
    FUZZ_REQUIRE(s->pgrp > 0, shown);
    FUZZ_REQUIRE(text.find(')') != std::string_view::npos, shown);
  }
  if (auto f = agent::ParseHeartbeatEnviron(text)) {
    FUZZ_REQUIRE(!f->path.empty() && f->timeout_ms > 0, shown);
    FUZZ_REQUIRE(text.find(agent::kHeartbeatFileEnv) != std::string_view::npos, shown);
    FUZZ_REQUIRE(text.find(f->path) != std::string_view::npos, shown);
  }
  if (shown.find('\0') == std::string::npos && !shown.empty()) {
    const int copies = 1 + static_cast<unsigned char>(shown[0]) % 8;
    const std::string visible = shown.substr(1);
    std::string joined;
    bool all = true;
    for (int i = 0; i < copies; ++i) {
      char out[64];
      if (!agent::RankDevices(visible.c_str(), i, copies, out, sizeof out)) {
        all = false;
        break;
      }
      FUZZ_REQUIRE(strlen(out) < sizeof out, shown);
      if (out[0] != '\0') joined += (joined.empty() ? "" : ",") + std::string(out);
    }
    const bool well_formed = visible.empty() || (visible.find(",,") == std::string::npos &&
                                                 visible.front() != ',' && visible.back() != ',');
    if (all && visible.size() < 64 && well_formed) {
      FUZZ_REQUIRE(joined == visible, shown);
    }
  }
  return 0;
}
