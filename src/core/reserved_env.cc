#include "core/reserved_env.h"

namespace gpusched::core {

bool IsReservedEnvName(std::string_view name) {
  return name.substr(0, kReservedEnvPrefix.size()) == kReservedEnvPrefix;
}

}  // namespace gpusched::core
