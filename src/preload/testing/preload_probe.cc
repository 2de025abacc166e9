// preload_probe: drives the CUDA driver API the way a task would, for preload_test. Built
// twice: linked against libcuda.so.1 (the fake), and (PROBE_DLOPEN) loading it at run time
// with dlopen, finding the entry points with dlsym (--via dlsym) or cuGetProcAddress
// (--via getproc, getproc2), as the CUDA runtime does. Runs the operations on its command
// line in order and prints one line per result, which the test reads:
//   alloc MIB | managed MIB | async MIB | create MIB | pitch WIDTH_BYTES ROWS |
//   array W H | array3d W H D    -> "<op> <args>: <CUresult>"
//   free I                       -> frees the I-th allocation made so far (0-based)
//   info                         -> "info free=MIB total=MIB"
//   device D                     -> the fake's current device for this thread
//   threads T MIB                -> T threads allocate MIB-chunks until refused; prints
//                                   "threads granted=MIB peak=MIB" (peak: the fake's most
//                                   held at once), then frees everything
//   child MIB                    -> a forked child allocates MIB: "child alloc MIB: R"
//   next                         -> which object dlsym(RTLD_NEXT, "dlsym") comes from
//   mipmap W H D LEVELS          -> a mipmapped FLOAT array
//   graphalloc MIB | graphnode MIB -> a new graph with a memory allocation node (added with
//                                   cuGraphAddMemAllocNode | cuGraphAddNode_v2)
//   graphfree I | graphdestroy I -> a free node for the I-th allocation in its graph | that
//                                   graph destroyed
//   pool MIB                     -> cuMemAllocFromPoolAsync from a pool made on device 0
//   ipcopen MIB | poolimport MIB | fdimport MIB
//                                -> memory exported from outside the task, imported (an IPC
//                                   handle | a pool pointer | a descriptor, then mapped)
//   ipcshare I                   -> the I-th allocation's IPC handle, opened
//   wipe | truncate              -> zeroes | truncates the ledger file ($GPUSCHED_PRELOAD_STATE)

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "preload/cuda_types.h"

namespace {

struct Api {
  CUresult (*mem_alloc)(CUdeviceptr*, size_t);
  CUresult (*mem_free)(CUdeviceptr);
  CUresult (*managed)(CUdeviceptr*, size_t, unsigned int);
  CUresult (*pitch)(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                     unsigned long long);
  CUresult (*release)(CUmemGenericAllocationHandle);
  CUresult (*array_create)(CUarray*, const CUDA_ARRAY_DESCRIPTOR*);
  CUresult (*array3d_create)(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*);
  CUresult (*array_destroy)(CUarray);
  CUresult (*alloc_async)(CUdeviceptr*, size_t, CUstream);
  CUresult (*free_async)(CUdeviceptr, CUstream);
  CUresult (*get_info)(size_t*, size_t*);
  CUresult (*mipmap_create)(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned int);
  CUresult (*mipmap_destroy)(CUmipmappedArray);
  CUresult (*graph_create)(CUgraph*, unsigned int);
  CUresult (*graph_destroy)(CUgraph);
  CUresult (*graph_alloc_node)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                               CUDA_MEM_ALLOC_NODE_PARAMS*);
  CUresult (*graph_free_node)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUdeviceptr);
  CUresult (*graph_add_node)(CUgraphNode*, CUgraph, const CUgraphNode*, const CUgraphEdgeData*,
                             size_t, CUgraphNodeParams*);
  CUresult (*pool_create)(CUmemoryPool*, const CUmemPoolProps*);
  CUresult (*pool_alloc)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
  CUresult (*ipc_get)(CUipcMemHandle*, CUdeviceptr);
  CUresult (*ipc_open)(CUdeviceptr*, CUipcMemHandle, unsigned int);
  CUresult (*ipc_close)(CUdeviceptr);
  CUresult (*pool_import)(CUdeviceptr*, CUmemoryPool, CUmemPoolPtrExportData*);
  CUresult (*import_handle)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType);
  CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                      unsigned long long);
  CUresult (*mem_unmap)(CUdeviceptr, size_t);
  void (*set_device)(int);
  unsigned long long (*peak)();
};

#ifdef PROBE_DLOPEN
template <typename Fn>
void Find(void* lib, const char* via, const char* symbol, const char* base, int version, Fn& fn) {
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t);
  using GetProc2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                                CUdriverProcAddressQueryResult*);
  void* p = nullptr;
  if (strcmp(via, "dlsym") == 0 || base == nullptr) {
    p = dlsym(lib, symbol);
  } else if (strcmp(via, "getproc") == 0) {
    auto get = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress"));
    if (get(base, &p, version, 0) != CUDA_SUCCESS) p = nullptr;
  } else {
    // As cudart 12 does: cuGetProcAddress_v2 found through cuGetProcAddress itself.
    auto get = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress"));
    void* v2 = nullptr;
    if (get("cuGetProcAddress", &v2, 12000, 0) != CUDA_SUCCESS) exit(3);
    CUdriverProcAddressQueryResult status = 0;
    if (reinterpret_cast<GetProc2>(v2)(base, &p, version, 0, &status) != CUDA_SUCCESS) p = nullptr;
  }
  if (p == nullptr) {
    fprintf(stderr, "probe: %s not found via %s\n", symbol, via);
    exit(3);
  }
  fn = reinterpret_cast<Fn>(p);
}

Api Load(const char* via) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    fprintf(stderr, "probe: %s\n", dlerror());
    exit(3);
  }
  Api a{};
  Find(lib, via, "cuMemAlloc_v2", "cuMemAlloc", 12000, a.mem_alloc);
  Find(lib, via, "cuMemFree_v2", "cuMemFree", 12000, a.mem_free);
  Find(lib, via, "cuMemAllocManaged", "cuMemAllocManaged", 12000, a.managed);
  Find(lib, via, "cuMemAllocPitch_v2", "cuMemAllocPitch", 12000, a.pitch);
  Find(lib, via, "cuMemCreate", "cuMemCreate", 12000, a.create);
  Find(lib, via, "cuMemRelease", "cuMemRelease", 12000, a.release);
  Find(lib, via, "cuArrayCreate_v2", "cuArrayCreate", 12000, a.array_create);
  Find(lib, via, "cuArray3DCreate_v2", "cuArray3DCreate", 12000, a.array3d_create);
  Find(lib, via, "cuArrayDestroy", "cuArrayDestroy", 12000, a.array_destroy);
  Find(lib, via, "cuMemAllocAsync", "cuMemAllocAsync", 12000, a.alloc_async);
  Find(lib, via, "cuMemFreeAsync", "cuMemFreeAsync", 12000, a.free_async);
  Find(lib, via, "cuMemGetInfo_v2", "cuMemGetInfo", 12000, a.get_info);
  Find(lib, via, "cuMipmappedArrayCreate", "cuMipmappedArrayCreate", 12000, a.mipmap_create);
  Find(lib, via, "cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy", 12000, a.mipmap_destroy);
  Find(lib, via, "cuGraphCreate", "cuGraphCreate", 12000, a.graph_create);
  Find(lib, via, "cuGraphDestroy", "cuGraphDestroy", 12000, a.graph_destroy);
  Find(lib, via, "cuGraphAddMemAllocNode", "cuGraphAddMemAllocNode", 12000, a.graph_alloc_node);
  Find(lib, via, "cuGraphAddMemFreeNode", "cuGraphAddMemFreeNode", 12000, a.graph_free_node);
  Find(lib, via, "cuGraphAddNode_v2", "cuGraphAddNode", 12030, a.graph_add_node);
  Find(lib, via, "cuMemPoolCreate", "cuMemPoolCreate", 12000, a.pool_create);
  Find(lib, via, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 12000, a.pool_alloc);
  Find(lib, via, "cuIpcGetMemHandle", "cuIpcGetMemHandle", 12000, a.ipc_get);
  Find(lib, via, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle", 12000, a.ipc_open);
  Find(lib, via, "cuIpcCloseMemHandle", "cuIpcCloseMemHandle", 12000, a.ipc_close);
  Find(lib, via, "cuMemPoolImportPointer", "cuMemPoolImportPointer", 12000, a.pool_import);
  Find(lib, via, "cuMemImportFromShareableHandle", "cuMemImportFromShareableHandle", 12000,
       a.import_handle);
  Find(lib, via, "cuMemMap", "cuMemMap", 12000, a.mem_map);
  Find(lib, via, "cuMemUnmap", "cuMemUnmap", 12000, a.mem_unmap);
  Find(lib, via, "fakecuda_set_device", nullptr, 0, a.set_device);
  Find(lib, via, "fakecuda_peak_bytes", nullptr, 0, a.peak);
  return a;
}
#else
extern "C" {
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocManaged(CUdeviceptr*, size_t, unsigned int);
CUresult cuMemAllocPitch_v2(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
CUresult cuMemCreate(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                     unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuArrayCreate_v2(CUarray*, const CUDA_ARRAY_DESCRIPTOR*);
CUresult cuArray3DCreate_v2(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*);
CUresult cuArrayDestroy(CUarray);
CUresult cuMemAllocAsync(CUdeviceptr*, size_t, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemGetInfo_v2(size_t*, size_t*);
CUresult cuMipmappedArrayCreate(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned int);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuGraphCreate(CUgraph*, unsigned int);
CUresult cuGraphDestroy(CUgraph);
CUresult cuGraphAddMemAllocNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                CUDA_MEM_ALLOC_NODE_PARAMS*);
CUresult cuGraphAddMemFreeNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUdeviceptr);
CUresult cuGraphAddNode_v2(CUgraphNode*, CUgraph, const CUgraphNode*, const CUgraphEdgeData*,
                           size_t, CUgraphNodeParams*);
CUresult cuMemPoolCreate(CUmemoryPool*, const CUmemPoolProps*);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
CUresult cuIpcGetMemHandle(CUipcMemHandle*, CUdeviceptr);
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr*, CUipcMemHandle, unsigned int);
CUresult cuIpcCloseMemHandle(CUdeviceptr);
CUresult cuMemPoolImportPointer(CUdeviceptr*, CUmemoryPool, CUmemPoolPtrExportData*);
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle*, void*,
                                        CUmemAllocationHandleType);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
CUresult cuMemUnmap(CUdeviceptr, size_t);
void fakecuda_set_device(int);
unsigned long long fakecuda_peak_bytes();
}
Api Load(const char*) {
  return Api{cuMemAlloc_v2,      cuMemFree_v2,   cuMemAllocManaged, cuMemAllocPitch_v2,
             cuMemCreate,        cuMemRelease,   cuArrayCreate_v2,  cuArray3DCreate_v2,
             cuArrayDestroy,     cuMemAllocAsync, cuMemFreeAsync,   cuMemGetInfo_v2,
             cuMipmappedArrayCreate, cuMipmappedArrayDestroy, cuGraphCreate, cuGraphDestroy,
             cuGraphAddMemAllocNode, cuGraphAddMemFreeNode, cuGraphAddNode_v2, cuMemPoolCreate,
             cuMemAllocFromPoolAsync, cuIpcGetMemHandle, cuIpcOpenMemHandle_v2,
             cuIpcCloseMemHandle, cuMemPoolImportPointer, cuMemImportFromShareableHandle,
             cuMemMap, cuMemUnmap, fakecuda_set_device, fakecuda_peak_bytes};
}
#endif

constexpr size_t kMiB = 1 << 20;

struct Held {
  // 1 pointer, 2 handle, 3 array, 4 async pointer, 5 mipmapped array, 6 graph allocation
  // (`graph` its graph), 7 IPC-opened pointer, 8 mapping of an imported handle (`handle`)
  int kind;
  unsigned long long key;
  CUgraph graph = nullptr;
  CUmemGenericAllocationHandle handle = 0;
  size_t bytes = 0;
};

Api g_api;

struct ThreadRun {
  size_t chunk;
  size_t granted = 0;
  std::vector<CUdeviceptr> ptrs;
};

void* AllocateUntilRefused(void* arg) {
  auto* run = static_cast<ThreadRun*>(arg);
  for (;;) {
    CUdeviceptr p = 0;
    if (g_api.mem_alloc(&p, run->chunk) != CUDA_SUCCESS) break;
    run->ptrs.push_back(p);
    run->granted += run->chunk;
    // Churn: every third chunk is given back and taken again, so frees race allocations.
    if (run->ptrs.size() % 3 == 0) {
      g_api.mem_free(run->ptrs.back());
      run->ptrs.pop_back();
      run->granted -= run->chunk;
      if (g_api.mem_alloc(&p, run->chunk) != CUDA_SUCCESS) break;
      run->ptrs.push_back(p);
      run->granted += run->chunk;
    }
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  int i = 1;
  const char* via = "linked";
  if (argc > 2 && strcmp(argv[1], "--via") == 0) {
    via = argv[2];
    i = 3;
  }
  g_api = Load(via);
  std::vector<Held> held;
  auto arg = [&](int k) { return static_cast<size_t>(strtoull(argv[i + k], nullptr, 10)); };
  while (i < argc) {
    const std::string op = argv[i];
    CUresult r = CUDA_SUCCESS;
    if (op == "alloc" || op == "managed" || op == "async" || op == "create") {
      const size_t bytes = arg(1) * kMiB;
      CUdeviceptr p = 0;
      CUmemGenericAllocationHandle h = 0;
      CUmemAllocationProp prop{};
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      if (op == "alloc") r = g_api.mem_alloc(&p, bytes);
      if (op == "managed") r = g_api.managed(&p, bytes, 1);
      if (op == "async") r = g_api.alloc_async(&p, bytes, nullptr);
      if (op == "create") r = g_api.create(&h, bytes, &prop, 0);
      if (r == CUDA_SUCCESS) {
        held.push_back(op == "create" ? Held{2, h} : Held{op == "async" ? 4 : 1, p});
      }
      printf("%s %zu: %d\n", op.c_str(), arg(1), r);
      i += 2;
    } else if (op == "pitch") {
      CUdeviceptr p = 0;
      size_t pitch = 0;
      r = g_api.pitch(&p, &pitch, arg(1), arg(2), 4);
      if (r == CUDA_SUCCESS) held.push_back({1, p});
      printf("pitch %zu %zu: %d\n", arg(1), arg(2), r);
      i += 3;
    } else if (op == "array" || op == "array3d") {
      CUarray a = nullptr;
      if (op == "array") {
        CUDA_ARRAY_DESCRIPTOR d{arg(1), arg(2), 0x20, 1};
        r = g_api.array_create(&a, &d);
      } else {
        CUDA_ARRAY3D_DESCRIPTOR d{arg(1), arg(2), arg(3), 0x20, 1, 0};
        r = g_api.array3d_create(&a, &d);
      }
      if (r == CUDA_SUCCESS) held.push_back({3, reinterpret_cast<uintptr_t>(a)});
      printf("%s: %d\n", op.c_str(), r);
      i += op == "array" ? 3 : 4;
    } else if (op == "mipmap") {
      CUmipmappedArray a = nullptr;
      CUDA_ARRAY3D_DESCRIPTOR d{arg(1), arg(2), arg(3), 0x20, 1, 0};
      r = g_api.mipmap_create(&a, &d, static_cast<unsigned>(arg(4)));
      if (r == CUDA_SUCCESS) held.push_back({5, reinterpret_cast<uintptr_t>(a)});
      printf("mipmap: %d\n", r);
      i += 5;
    } else if (op == "graphalloc" || op == "graphnode") {
      CUgraph graph = nullptr;
      g_api.graph_create(&graph, 0);
      CUgraphNode node = nullptr;
      CUgraphNodeParams params{};
      params.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
      params.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      params.alloc.bytesize = arg(1) * kMiB;
      r = op == "graphalloc"
              ? g_api.graph_alloc_node(&node, graph, nullptr, 0, &params.alloc)
              : g_api.graph_add_node(&node, graph, nullptr, nullptr, 0, &params);
      if (r == CUDA_SUCCESS) held.push_back({6, params.alloc.dptr, graph});
      printf("%s %zu: %d\n", op.c_str(), arg(1), r);
      i += 2;
    } else if (op == "graphfree" || op == "graphdestroy") {
      const Held& h = held.at(arg(1));
      CUgraphNode node = nullptr;
      r = op == "graphfree" ? g_api.graph_free_node(&node, h.graph, nullptr, 0, h.key)
                            : g_api.graph_destroy(h.graph);
      printf("%s %zu: %d\n", op.c_str(), arg(1), r);
      i += 2;
    } else if (op == "pool") {
      static CUmemoryPool pool = nullptr;
      CUmemPoolProps props{};
      props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      if (pool == nullptr) g_api.pool_create(&pool, &props);
      CUdeviceptr p = 0;
      r = g_api.pool_alloc(&p, arg(1) * kMiB, pool, nullptr);
      if (r == CUDA_SUCCESS) held.push_back({4, p});
      printf("pool %zu: %d\n", arg(1), r);
      i += 2;
    } else if (op == "ipcopen" || op == "ipcshare" || op == "poolimport") {
      // ipcopen/poolimport MIB: a handle from outside the task; ipcshare I: held[I]'s own.
      CUipcMemHandle handle{};
      const unsigned long long bytes = arg(1) * kMiB;
      memcpy(handle.reserved, &bytes, sizeof bytes);
      if (op == "ipcshare") g_api.ipc_get(&handle, held.at(arg(1)).key);
      CUdeviceptr p = 0;
      if (op == "poolimport") {
        CUmemPoolPtrExportData data{};
        memcpy(data.reserved, &bytes, sizeof bytes);
        r = g_api.pool_import(&p, nullptr, &data);
      } else {
        r = g_api.ipc_open(&p, handle, 1);
      }
      if (r == CUDA_SUCCESS) held.push_back({op == "poolimport" ? 1 : 7, p});
      printf("%s %zu: %d\n", op.c_str(), arg(1), r);
      i += 2;
    } else if (op == "fdimport") {
      // A VMM allocation from outside the task, as a descriptor, imported and mapped.
      const unsigned long long bytes = arg(1) * kMiB;
      const int fd = memfd_create("probe-export", MFD_CLOEXEC);
      if (fd < 0 || pwrite(fd, &bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
        return 4;
      }
      CUmemGenericAllocationHandle h = 0;
      r = g_api.import_handle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      static CUdeviceptr next_va = 0x100000000000ULL;
      const CUdeviceptr va = next_va += (bytes + kMiB);
      if (r == CUDA_SUCCESS) r = g_api.mem_map(va, bytes, 0, h, 0);
      if (r == CUDA_SUCCESS) held.push_back({8, va, nullptr, h, bytes});
      close(fd);
      printf("fdimport %zu: %d\n", arg(1), r);
      i += 2;
    } else if (op == "wipe" || op == "truncate") {
      // What a task may do to its own ledger: zero it in place, or cut it to nothing.
      const char* path = getenv("GPUSCHED_PRELOAD_STATE");
      const int fd = path != nullptr ? open(path, O_RDWR) : -1;
      struct stat st{};
      bool ok = fd >= 0 && fstat(fd, &st) == 0;
      if (ok && op == "wipe") {
        std::vector<char> zeros(static_cast<size_t>(st.st_size), 0);
        ok = pwrite(fd, zeros.data(), zeros.size(), 0) == st.st_size;
      }
      if (ok && op == "truncate") ok = ftruncate(fd, 0) == 0;
      if (fd >= 0) close(fd);
      printf("%s: %s\n", op.c_str(), ok ? "done" : "failed");
      i += 1;
    } else if (op == "free") {
      const Held& h = held.at(arg(1));
      if (h.kind == 1) r = g_api.mem_free(h.key);
      if (h.kind == 2) r = g_api.release(h.key);
      if (h.kind == 3) r = g_api.array_destroy(reinterpret_cast<CUarray>(h.key));
      if (h.kind == 4) r = g_api.free_async(h.key, nullptr);
      if (h.kind == 5) r = g_api.mipmap_destroy(reinterpret_cast<CUmipmappedArray>(h.key));
      if (h.kind == 6) r = g_api.mem_free(h.key);  // a graph's allocation, freed outside it
      if (h.kind == 7) r = g_api.ipc_close(h.key);
      if (h.kind == 8) {
        r = g_api.mem_unmap(h.key, h.bytes);
        if (r == CUDA_SUCCESS) r = g_api.release(h.handle);
      }
      printf("free %zu: %d\n", arg(1), r);
      i += 2;
    } else if (op == "info") {
      size_t free_bytes = 0, total = 0;
      r = g_api.get_info(&free_bytes, &total);
      printf("info free=%zu total=%zu\n", free_bytes / kMiB, total / kMiB);
      i += 1;
    } else if (op == "device") {
      g_api.set_device(static_cast<int>(arg(1)));
      i += 2;
    } else if (op == "threads") {
      std::vector<ThreadRun> runs(arg(1));
      std::vector<pthread_t> threads(runs.size());
      for (size_t t = 0; t < runs.size(); ++t) {
        runs[t].chunk = arg(2) * kMiB;
        pthread_create(&threads[t], nullptr, AllocateUntilRefused, &runs[t]);
      }
      size_t granted = 0;
      for (size_t t = 0; t < runs.size(); ++t) {
        pthread_join(threads[t], nullptr);
        granted += runs[t].granted;
      }
      printf("threads granted=%zu peak=%llu\n", granted / kMiB, g_api.peak() / kMiB);
      for (ThreadRun& run : runs) {
        for (CUdeviceptr p : run.ptrs) g_api.mem_free(p);
      }
      i += 3;
    } else if (op == "child") {
      fflush(stdout);
      const pid_t pid = fork();
      if (pid == 0) {
        CUdeviceptr p = 0;
        printf("child alloc %zu: %d\n", arg(1), g_api.mem_alloc(&p, arg(1) * kMiB));
        fflush(stdout);
        _exit(0);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      i += 2;
    } else if (op == "next") {
      Dl_info info{};
      void* next = dlsym(RTLD_NEXT, "dlsym");
      const char* from = next != nullptr && dladdr(next, &info) != 0 && info.dli_fname != nullptr
                             ? info.dli_fname
                             : "?";
      printf("next %s\n", strstr(from, "preload") != nullptr ? "preload" : "other");
      i += 1;
    } else {
      fprintf(stderr, "probe: unknown op %s\n", op.c_str());
      return 2;
    }
  }
  return 0;
}
