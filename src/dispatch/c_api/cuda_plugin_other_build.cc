// Issue 42's loading test: a CUDA plugin from "another build": the right file name, entry point
// and table version, another build stamp, and no functions. libgpusched_c must refuse it by
// its stamp without calling into it (test Issue42_CudaLoadedAtRunTime_OtherBuildRefused).

#include "dispatch/cuda/cuda_plugin.h"

namespace {

constexpr gpusched::dispatch::CudaPlugin kOtherBuild = {
    gpusched::dispatch::kCudaPluginVersion, sizeof(gpusched::dispatch::CudaPlugin),
    "another build", nullptr, nullptr, nullptr};

}  // namespace

extern "C" __attribute__((visibility("default"))) const gpusched::dispatch::CudaPlugin*
gpusched_cuda_plugin_v1() {
  return &kOtherBuild;
}
