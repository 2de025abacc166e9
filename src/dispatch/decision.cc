#include "dispatch/decision.h"

namespace gpusched::dispatch {

const char* DecisionName(Decision d) {
  switch (d) {
    case Decision::kGrabDirect: return "grab_direct";
    case Decision::kGrab: return "grab";
    case Decision::kGiveUp: return "give_up";
  }
  return "?";
}

}  // namespace gpusched::dispatch
