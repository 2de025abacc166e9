#include "base/rng.h"

namespace gpusched {

uint64_t Rng::FreshSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace gpusched
