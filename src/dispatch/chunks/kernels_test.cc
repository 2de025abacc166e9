// The built-in kernels' names: those the C ABI publishes (GPUSCHED_KERNEL_* of
// gpusched_chunks_c.h) are exactly those KernelRegistry::WithBuiltins() registers.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dispatch/c_api/gpusched_chunks_c.h"
#include "dispatch/chunks/kernels.h"

namespace gpusched::chunks {
namespace {

TEST(ChunkKernels, PublicHeaderNamesEveryBuiltin) {
  std::vector<std::string> published = {
      GPUSCHED_KERNEL_VADD_U32, GPUSCHED_KERNEL_SCALE_U32, GPUSCHED_KERNEL_VADD_F32,
      GPUSCHED_KERNEL_SCALE_F32, GPUSCHED_KERNEL_SUM_U32, GPUSCHED_KERNEL_HISTOGRAM_U32};
  std::sort(published.begin(), published.end());
  EXPECT_EQ(KernelRegistry::WithBuiltins()->Names(), published);  // Names() is sorted (a std::map)
}

}  // namespace
}  // namespace gpusched::chunks
