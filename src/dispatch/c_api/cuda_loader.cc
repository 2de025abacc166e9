#include "dispatch/c_api/cuda_loader.h"

#include <dlfcn.h>

#include <cstring>
#include <string>

namespace gpusched::capi {
namespace {

using dispatch::CudaPluginEntry;
using dispatch::kCudaPluginBuild;
using dispatch::kCudaPluginEntry;
using dispatch::kCudaPluginFile;
using dispatch::kCudaPluginVersion;

struct LoadedCudaPlugin {
  const dispatch::CudaPlugin* plugin = nullptr;
  Status reason;  // why plugin is null
};

// The directory this library was loaded from, with a trailing '/'.
StatusOr<std::string> LibraryDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&LibraryDirectory), &info) == 0 ||
      info.dli_fname == nullptr) {
    return Unavailable("CUDA plugin not loaded: dladdr cannot name libgpusched_c's own file");
  }
  const std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? std::string("./") : self.substr(0, slash + 1);
}

// Refuses a table this library cannot use: another table version, or another build.
Status CheckCudaPluginTable(const std::string& path, const dispatch::CudaPlugin* table) {
  const std::string from = "CUDA plugin " + path + ": ";
  if (table == nullptr) return Unavailable(from + std::string(kCudaPluginEntry) + " returned null");
  if (table->version != kCudaPluginVersion || table->size != sizeof(dispatch::CudaPlugin)) {
    return Unavailable(from + "table version " + std::to_string(table->version) + ", this library needs " +
                       std::to_string(kCudaPluginVersion));
  }
  if (table->build == nullptr || std::strcmp(table->build, kCudaPluginBuild) != 0) {
    return Unavailable(from + "built by \"" + (table->build ? table->build : "?") +
                       "\", this library by \"" + kCudaPluginBuild + "\" (install both from one build)");
  }
  return Status::Ok();
}

LoadedCudaPlugin LoadCudaPlugin() {
  StatusOr<std::string> dir = LibraryDirectory();
  if (!dir.ok()) return {nullptr, dir.status()};
  const std::string path = *dir + kCudaPluginFile;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return {nullptr, Unavailable("CUDA plugin " + path + " not loaded: " + (why ? why : "dlopen failed"))};
  }
  // Never dlclosed: kernels and devices made by the plugin point into its code.
  auto entry = reinterpret_cast<CudaPluginEntry>(dlsym(handle, kCudaPluginEntry));
  if (entry == nullptr) {
    return {nullptr, Unavailable("CUDA plugin " + path + ": no entry point " + kCudaPluginEntry)};
  }
  const dispatch::CudaPlugin* table = entry();
  const Status usable = CheckCudaPluginTable(path, table);
  if (!usable.ok()) return {nullptr, usable};
  return {table, Status::Ok()};
}

}  // namespace

StatusOr<const dispatch::CudaPlugin*> OpenCudaPlugin() {
  static const LoadedCudaPlugin loaded = LoadCudaPlugin();  // once per process, thread-safe
  if (loaded.plugin == nullptr) return loaded.reason;
  return loaded.plugin;
}

StatusOr<int> CudaDeviceCount() {
  GS_ASSIGN_OR_RETURN(const dispatch::CudaPlugin* plugin, OpenCudaPlugin());
  return plugin->device_count();
}

}  // namespace gpusched::capi
