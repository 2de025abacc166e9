#pragma once
// Loads the CUDA plugin (dispatch/cuda/cuda_plugin.h) into libgpusched_c at first use: the file
// kCudaPluginFile in the directory libgpusched_c itself was loaded from (dladdr), never a
// search path or an environment variable, so what a process's environment says does not choose
// code to run inside it. Loaded once per process and never unloaded; a failure is remembered
// too (a plugin installed later is seen by the next process).
//
// Thread-safety: thread-safe.

#include "base/status.h"
#include "dispatch/cuda/cuda_plugin.h"

namespace gpusched::capi {

// The plugin, or Unavailable naming what is missing: "CUDA plugin DIR/libgpusched_cuda.so.1
// not loaded: <dlerror>", a missing entry point, or a plugin from another build.
StatusOr<const dispatch::CudaPlugin*> OpenCudaPlugin();

// The plugin's device count, or Unavailable with the reason there is no CUDA device: the
// plugin's (above) or the driver's ("no usable CUDA driver or GPU: cudaGetDeviceCount: ...").
StatusOr<int> CudaDeviceCount();

}  // namespace gpusched::capi
