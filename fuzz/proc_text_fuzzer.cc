// The /proc texts the agent reads to see whether a task is hung (agent/executor_status.h):
// /proc/PID/stat (a task chooses its comm, which may hold spaces and parentheses) and
// /proc/PID/environ (the task's own environment). A parsed stat has a positive group; a parsed
// heartbeat file has a path and a positive timeout, and comes from the variables' own text.

#include <string>

#include "agent/executor_status.h"
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
  return 0;
}
