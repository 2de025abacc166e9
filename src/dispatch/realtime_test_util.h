#pragma once
// Test helpers shared by the RealtimeDispatcher tests: the PATENTS.md section 1 example service
// (cost = 100, wait = 50, try = 10 ms) and a dispatcher over it on a given clock.

#include <gtest/gtest.h>

#include <memory>

#include "dispatch/realtime_dispatcher.h"

namespace gpusched::dispatch {

inline DispatcherConfig OneService(int gpus) {
  DispatcherConfig c;
  c.gpu_count = gpus;
  c.services = {{.name = "ocr", .cost_time = 100, .wait_time = 50, .try_time = 10}};
  return c;
}

inline std::unique_ptr<RealtimeDispatcher> Make(DispatcherConfig c, Clock& clock) {
  auto d = RealtimeDispatcher::Create(std::move(c), clock);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return std::move(d).value();
}

}  // namespace gpusched::dispatch
