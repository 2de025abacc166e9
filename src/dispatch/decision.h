#pragma once
// The per-GPU decision of CN113051059B claims 1 and 3, as a pure function.

#include "base/clock.h"

namespace gpusched::dispatch {

enum class Decision {
  kGrabDirect,  // claim 3: the wait budget is spent; take a GPU without comparing times
  kGrab,        // claim 1: the GPU is idle, or the task fits inside its remaining busy window
  kGiveUp,      // claim 1: the task would outlast the running one; try again later (claim 2)
};

// w: remaining wait budget; fin: the GPU's expected finish time; now: current time;
// cost: the service's expected run time. All in ms.
//
// Why grab when fin - now >= cost: the claims give no reason. PATENTS.md reads it as
// backfilling by co-execution: a task that fits inside the GPU's remaining busy window starts
// now beside the running one; a task that would outlast it waits for the GPU to go idle.
constexpr Decision Decide(DurationMs w, TimeMs fin, TimeMs now, DurationMs cost) {
  if (w <= 0) return Decision::kGrabDirect;  // claim 3
  const DurationMs d = fin - now;
  if (d <= 0) return Decision::kGrab;     // claim 1: the GPU is idle
  if (d >= cost) return Decision::kGrab;  // claim 1: fits in the remaining busy window
  return Decision::kGiveUp;               // claim 1 -> claim 2
}

const char* DecisionName(Decision d);

}  // namespace gpusched::dispatch
