#pragma once
// Resource quantities of the cluster model. Units: CPU in millicores, memory in MiB.

#include <cstdint>

#include "base/units.h"

namespace gpusched::core {

struct Resources {
  int64_t cpu_milli = 0;
  MiB mem_mib = 0;

  Resources& operator+=(const Resources& o) {
    cpu_milli += o.cpu_milli;
    mem_mib += o.mem_mib;
    return *this;
  }
  Resources& operator-=(const Resources& o) {
    cpu_milli -= o.cpu_milli;
    mem_mib -= o.mem_mib;
    return *this;
  }
  bool operator==(const Resources&) const = default;
};

}  // namespace gpusched::core
