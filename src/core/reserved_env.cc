#include "core/reserved_env.h"

#include "core/task.h"

namespace gpusched::core {

bool IsReservedEnvName(std::string_view name) {
  return name.substr(0, kReservedEnvPrefix.size()) == kReservedEnvPrefix;
}

bool IsServerSetEnvName(std::string_view name) {
  return name == kArrayIndexEnv || name == "GPUSCHED_GANG_NODES" ||
         name == "GPUSCHED_TASKS_PER_NODE";
}

}  // namespace gpusched::core
