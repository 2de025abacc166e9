// libgpusched_preload.so: holds a task to its GPU-memory share (CN109992422A places tasks by
// GPU memory and lets them share a GPU, claim 2; this is what makes the share hold).
//
// Injected with LD_PRELOAD by the agent. It exports the CUDA driver API's allocation entry
// points under their real names, so a program linked against libcuda binds to these; and it
// exports dlsym and wraps cuGetProcAddress(_v2), so a program (or the CUDA runtime) that
// loads libcuda with dlopen and looks the functions up gets these too. Each wrapper charges
// the request against the task's share ($GPUSCHED_GPU_MEM_MIB, MiB per visible device, comma
// separated) in the ShareLedger before calling the real function, found with the real dlsym
// in libcuda.so.1. See README.md for what is isolated and what is not.

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/allocation_table.h"
#include "preload/cuda_types.h"
#include "preload/share_ledger.h"

#define GPUSCHED_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpusched::preload {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;

// ------------------------------------------------------------ the real dlsym and libcuda

using DlsymFn = void* (*)(void*, const char*);
DlsymFn g_real_dlsym = nullptr;  // atomic access

DlsymFn RealDlsym() {
  DlsymFn fn = __atomic_load_n(&g_real_dlsym, __ATOMIC_ACQUIRE);
  if (fn != nullptr) return fn;
  // dlvsym is not interposed, so this finds libc's dlsym (2.34 moved it from libdl to libc).
  static const char* const kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
  for (const char* version : kVersions) {
    fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", version));
    if (fn != nullptr) break;
  }
  if (fn == nullptr) {
    static const char kMsg[] = "gpusched preload: cannot find the C library's dlsym\n";
    (void)!write(2, kMsg, sizeof kMsg - 1);
    abort();
  }
  __atomic_store_n(&g_real_dlsym, fn, __ATOMIC_RELEASE);
  return fn;
}

void* g_libcuda = nullptr;  // atomic access

// The real driver function `name`, from libcuda.so.1 (already loaded by the program, linked
// or dlopen'ed; loaded here otherwise). Null when there is no driver.
void* RealCuda(const char* name) {
  void* lib = __atomic_load_n(&g_libcuda, __ATOMIC_ACQUIRE);
  if (lib == nullptr) {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == nullptr) return nullptr;
    __atomic_store_n(&g_libcuda, lib, __ATOMIC_RELEASE);
  }
  return RealDlsym()(lib, name);
}

template <typename Fn>
Fn Resolve(Fn* cache, const char* name) {
  Fn fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
  if (fn == nullptr) {
    fn = reinterpret_cast<Fn>(RealCuda(name));
    __atomic_store_n(cache, fn, __ATOMIC_RELEASE);
  }
  return fn;
}
#define REAL(fn_type, name)                   \
  static fn_type cache_##fn_type = nullptr;   \
  fn_type real = Resolve(&cache_##fn_type, name); \
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND

// ------------------------------------------------------------ the share

struct Share {
  bool limited = false;  // GPUSCHED_GPU_MEM_MIB set: every allocation is charged
  bool invalid = false;  // set but unreadable: every allocation is refused (fail closed)
  int devices = 0;
  uint64_t limit_bytes[kMaxDevices] = {};
  ShareLedger* ledger = nullptr;
};
Share g_share;
pthread_once_t g_share_once = PTHREAD_ONCE_INIT;
AllocationTable g_table;
int g_refusals_logged = 0;  // atomic access

void Say(const char* text) { (void)!write(2, text, strlen(text)); }

// "1024" or "1024,2048": MiB per visible device, in CUDA ordinal order.
bool ParseShare(const char* text, Share* share) {
  const char* p = text;
  while (*p != '\0') {
    if (share->devices == kMaxDevices || *p < '0' || *p > '9') return false;
    uint64_t mib = 0;
    while (*p >= '0' && *p <= '9') {
      mib = mib * 10 + static_cast<uint64_t>(*p - '0');
      if (mib > (1ULL << 40)) return false;  // a petabyte per GPU is a typo
      ++p;
    }
    share->limit_bytes[share->devices++] = mib * kMiB;
    if (*p == ',') ++p;
    else if (*p != '\0') return false;
  }
  return share->devices > 0;
}

void InitShare() {
  const char* text = getenv("GPUSCHED_GPU_MEM_MIB");
  if (text == nullptr || text[0] == '\0') return;  // no share: the wrappers pass through
  g_share.limited = true;
  char msg[256];
  if (!ParseShare(text, &g_share)) {
    snprintf(msg, sizeof msg,
             "gpusched preload: GPUSCHED_GPU_MEM_MIB=\"%.64s\" is not MiB per device (e.g. "
             "\"4096\" or \"4096,4096\"); refusing every GPU allocation\n", text);
    Say(msg);
    g_share.invalid = true;
    return;
  }
  const char* error = "";
  g_share.ledger = ShareLedger::Open(getenv("GPUSCHED_PRELOAD_STATE"), &error);
  if (g_share.ledger == nullptr) {
    snprintf(msg, sizeof msg, "gpusched preload: %s; refusing every GPU allocation\n", error);
    Say(msg);
    g_share.invalid = true;
  }
}

const Share& TheShare() {
  pthread_once(&g_share_once, InitShare);
  return g_share;
}

uint64_t LimitOf(const Share& share, int device) {
  return device >= 0 && device < share.devices ? share.limit_bytes[device] : 0;
}

using CtxGetDeviceFn = CUresult (*)(CUdevice*);
int CurrentDevice() {
  static CtxGetDeviceFn cache = nullptr;
  CtxGetDeviceFn fn = Resolve(&cache, "cuCtxGetDevice");
  CUdevice device = 0;
  if (fn == nullptr || fn(&device) != CUDA_SUCCESS) return 0;
  return device;
}

CUresult Refuse(const Share& share, int device, uint64_t bytes) {
  if (share.ledger != nullptr) share.ledger->NoteRefused();
  if (__atomic_fetch_add(&g_refusals_logged, 1, __ATOMIC_RELAXED) < 8) {
    const uint64_t held = share.ledger != nullptr ? share.ledger->Held(device) : 0;
    char msg[256];
    snprintf(msg, sizeof msg,
             "gpusched: GPU memory share exceeded: refused %llu MiB on device %d, the task "
             "holds %llu MiB of its %llu MiB share\n",
             static_cast<unsigned long long>((bytes + kMiB - 1) / kMiB), device,
             static_cast<unsigned long long>(held / kMiB),
             static_cast<unsigned long long>(LimitOf(share, device) / kMiB));
    Say(msg);
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

// Charges `bytes` on `device`, runs `allocate` (which stores the new object's key), records
// the charge under that key; undoes the charge when the driver fails. `undo` frees what the
// driver gave when the charge cannot be recorded.
template <typename Allocate, typename Undo>
CUresult ChargeAndAllocate(int device, uint64_t bytes, AllocKind kind, Allocate allocate,
                           Undo undo) {
  const Share& share = TheShare();
  if (!share.limited) return allocate(nullptr);
  if (share.invalid || !share.ledger->Charge(device, bytes, LimitOf(share, device))) {
    return Refuse(share, device, bytes);
  }
  uint64_t key = 0;
  const CUresult r = allocate(&key);
  if (r != CUDA_SUCCESS) {
    share.ledger->Release(device, bytes);
    return r;
  }
  if (!g_table.Insert(kind, key, {device, bytes})) {
    undo(key);
    share.ledger->Release(device, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

void Uncharge(AllocKind kind, uint64_t key) {
  const Share& share = TheShare();
  if (!share.limited || share.ledger == nullptr) return;
  const Charged c = g_table.Remove(kind, key);
  if (c.device >= 0) share.ledger->Release(c.device, c.bytes);
}

uint64_t ArrayBytes(size_t width, size_t height, size_t depth, CUarray_format format,
                    unsigned channels) {
  uint64_t element = 4;  // formats not listed (block-compressed, packed): 4 bytes a channel
  switch (format) {
    case 0x01: case 0x08: element = 1; break;               // (UN)SIGNED_INT8
    case 0x02: case 0x09: case 0x10: element = 2; break;    // (UN)SIGNED_INT16, HALF
    case 0x03: case 0x0a: case 0x20: element = 4; break;    // (UN)SIGNED_INT32, FLOAT
    default: break;
  }
  return static_cast<uint64_t>(width) * (height ? height : 1) * (depth ? depth : 1) *
         (channels ? channels : 1) * element;
}

}  // namespace
}  // namespace gpusched::preload

using namespace gpusched::preload;  // NOLINT: the exported wrappers below are C functions

// ------------------------------------------------------------ the wrapped driver API

using MemAllocFn = CUresult (*)(CUdeviceptr*, size_t);
using MemFreeFn = CUresult (*)(CUdeviceptr);
using MemAllocManagedFn = CUresult (*)(CUdeviceptr*, size_t, unsigned int);
using MemAllocPitchFn = CUresult (*)(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
using MemCreateFn = CUresult (*)(CUmemGenericAllocationHandle*, size_t,
                                 const CUmemAllocationProp*, unsigned long long);
using MemReleaseFn = CUresult (*)(CUmemGenericAllocationHandle);
using ArrayCreateFn = CUresult (*)(CUarray*, const CUDA_ARRAY_DESCRIPTOR*);
using Array3DCreateFn = CUresult (*)(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*);
using ArrayDestroyFn = CUresult (*)(CUarray);
using MemGetInfoFn = CUresult (*)(size_t*, size_t*);
using MemAllocAsyncFn = CUresult (*)(CUdeviceptr*, size_t, CUstream);
using MemFreeAsyncFn = CUresult (*)(CUdeviceptr, CUstream);
using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t);
using GetProcAddressV2Fn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult*);

// The frees, declared for the allocations that must undo themselves.
GPUSCHED_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr);
GPUSCHED_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
GPUSCHED_EXPORT CUresult cuArrayDestroy(CUarray array);

// A device-pointer allocation through `call` (which stores the pointer in *dptr), charged to
// the current device; an array creation likewise.
template <typename Call>
static CUresult ChargedPointer(CUdeviceptr* dptr, uint64_t bytes, Call call) {
  return ChargeAndAllocate(CurrentDevice(), bytes, AllocKind::kDevicePtr,
                           [&](uint64_t* key) {
                             const CUresult r = call();
                             if (key != nullptr) *key = *dptr;
                             return r;
                           },
                           [](uint64_t key) { cuMemFree_v2(key); });
}
template <typename Call>
static CUresult ChargedArray(CUarray* array, uint64_t bytes, Call call) {
  return ChargeAndAllocate(CurrentDevice(), bytes, AllocKind::kArray,
                           [&](uint64_t* key) {
                             const CUresult r = call();
                             if (key != nullptr) *key = reinterpret_cast<uintptr_t>(*array);
                             return r;
                           },
                           [](uint64_t key) { cuArrayDestroy(reinterpret_cast<CUarray>(key)); });
}

GPUSCHED_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  REAL(MemAllocFn, "cuMemAlloc_v2");
  if (dptr == nullptr) return real(dptr, bytes);
  return ChargedPointer(dptr, bytes, [&] { return real(dptr, bytes); });
}

GPUSCHED_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  REAL(MemFreeFn, "cuMemFree_v2");
  const CUresult r = real(dptr);
  if (r == CUDA_SUCCESS) Uncharge(AllocKind::kDevicePtr, dptr);
  return r;
}

// Managed memory can migrate to the host, but it may all be resident on the device at once:
// it is charged in full, as device memory.
GPUSCHED_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  REAL(MemAllocManagedFn, "cuMemAllocManaged");
  if (dptr == nullptr) return real(dptr, bytes, flags);
  return ChargedPointer(dptr, bytes, [&] { return real(dptr, bytes, flags); });
}

// The pitch is the driver's choice: charged width x height first, then trued up to
// pitch x height (refused, and freed, when the padding does not fit).
GPUSCHED_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                            size_t height, unsigned int element_size) {
  REAL(MemAllocPitchFn, "cuMemAllocPitch_v2");
  if (dptr == nullptr || pitch == nullptr) return real(dptr, pitch, width, height, element_size);
  const int device = CurrentDevice();
  const uint64_t estimate = static_cast<uint64_t>(width) * height;
  const CUresult r = ChargeAndAllocate(device, estimate, AllocKind::kDevicePtr,
                             [&](uint64_t* key) {
                               const CUresult rr = real(dptr, pitch, width, height, element_size);
                               if (key != nullptr) *key = *dptr;
                               return rr;
                             },
                             [](uint64_t key) { cuMemFree_v2(key); });
  const Share& share = TheShare();
  if (r != CUDA_SUCCESS || !share.limited) return r;
  const uint64_t actual = static_cast<uint64_t>(*pitch) * height;
  if (actual <= estimate) return r;
  if (!share.ledger->Charge(device, actual - estimate, LimitOf(share, device))) {
    cuMemFree_v2(*dptr);  // gives back the estimate
    *dptr = 0;
    return Refuse(share, device, actual);
  }
  g_table.Insert(AllocKind::kDevicePtr, *dptr, {device, actual});  // replaces the estimate
  return r;
}

// Physical memory of the virtual memory management API, charged when it is on a device
// (host-located allocations are not GPU memory).
GPUSCHED_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
  REAL(MemCreateFn, "cuMemCreate");
  if (handle == nullptr || prop == nullptr ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return real(handle, bytes, prop, flags);
  }
  return ChargeAndAllocate(prop->location.id, bytes, AllocKind::kHandle,
                 [&](uint64_t* key) {
                   const CUresult r = real(handle, bytes, prop, flags);
                   if (key != nullptr) *key = *handle;
                   return r;
                 },
                 [](uint64_t key) { cuMemRelease(key); });
}

GPUSCHED_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  REAL(MemReleaseFn, "cuMemRelease");
  const CUresult r = real(handle);
  if (r == CUDA_SUCCESS) Uncharge(AllocKind::kHandle, handle);
  return r;
}

GPUSCHED_EXPORT CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) {
  REAL(ArrayCreateFn, "cuArrayCreate_v2");
  if (array == nullptr || desc == nullptr) return real(array, desc);
  const uint64_t bytes = ArrayBytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
  return ChargedArray(array, bytes, [&] { return real(array, desc); });
}

GPUSCHED_EXPORT CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  REAL(Array3DCreateFn, "cuArray3DCreate_v2");
  if (array == nullptr || desc == nullptr) return real(array, desc);
  const uint64_t bytes =
      ArrayBytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
  return ChargedArray(array, bytes, [&] { return real(array, desc); });
}

GPUSCHED_EXPORT CUresult cuArrayDestroy(CUarray array) {
  REAL(ArrayDestroyFn, "cuArrayDestroy");
  const CUresult r = real(array);
  if (r == CUDA_SUCCESS) Uncharge(AllocKind::kArray, reinterpret_cast<uintptr_t>(array));
  return r;
}

// Stream-ordered allocations are charged when requested and given back when the free is
// enqueued (a pool's cached memory beyond that is not charged: see README.md).
static CUresult AllocAsync(MemAllocAsyncFn real, CUdeviceptr* dptr, size_t bytes,
                           CUstream stream) {
  if (dptr == nullptr) return real(dptr, bytes, stream);
  return ChargedPointer(dptr, bytes, [&] { return real(dptr, bytes, stream); });
}

GPUSCHED_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  REAL(MemAllocAsyncFn, "cuMemAllocAsync");
  return AllocAsync(real, dptr, bytes, stream);
}

GPUSCHED_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  REAL(MemAllocAsyncFn, "cuMemAllocAsync_ptsz");
  return AllocAsync(real, dptr, bytes, stream);
}

GPUSCHED_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  REAL(MemFreeAsyncFn, "cuMemFreeAsync");
  const CUresult r = real(dptr, stream);
  if (r == CUDA_SUCCESS) Uncharge(AllocKind::kDevicePtr, dptr);
  return r;
}

GPUSCHED_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  REAL(MemFreeAsyncFn, "cuMemFreeAsync_ptsz");
  const CUresult r = real(dptr, stream);
  if (r == CUDA_SUCCESS) Uncharge(AllocKind::kDevicePtr, dptr);
  return r;
}

// The share is the device's total; free is what the task has left of it (never more than the
// device really has free).
GPUSCHED_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  REAL(MemGetInfoFn, "cuMemGetInfo_v2");
  const CUresult r = real(free_bytes, total_bytes);
  const Share& share = TheShare();
  if (r != CUDA_SUCCESS || !share.limited || free_bytes == nullptr || total_bytes == nullptr) {
    return r;
  }
  const int device = CurrentDevice();
  uint64_t total = LimitOf(share, device);
  if (share.invalid) total = 0;
  if (total > *total_bytes) total = *total_bytes;
  const uint64_t held = share.ledger != nullptr ? share.ledger->Held(device) : total;
  const uint64_t left = held < total ? total - held : 0;
  *total_bytes = static_cast<size_t>(total);
  if (left < *free_bytes) *free_bytes = static_cast<size_t>(left);
  return r;
}

// ------------------------------------------------------------ look-ups

GPUSCHED_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                          cuuint64_t flags);
GPUSCHED_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                             cuuint64_t flags,
                                             CUdriverProcAddressQueryResult* status);

namespace {

struct Wrapped {
  const char* name;  // as exported by libcuda (dlsym)
  void* wrapper;
};
const Wrapped kWrapped[] = {
    {"cuMemAlloc_v2", reinterpret_cast<void*>(&cuMemAlloc_v2)},
    {"cuMemFree_v2", reinterpret_cast<void*>(&cuMemFree_v2)},
    {"cuMemAllocManaged", reinterpret_cast<void*>(&cuMemAllocManaged)},
    {"cuMemAllocPitch_v2", reinterpret_cast<void*>(&cuMemAllocPitch_v2)},
    {"cuMemCreate", reinterpret_cast<void*>(&cuMemCreate)},
    {"cuMemRelease", reinterpret_cast<void*>(&cuMemRelease)},
    {"cuArrayCreate_v2", reinterpret_cast<void*>(&cuArrayCreate_v2)},
    {"cuArray3DCreate_v2", reinterpret_cast<void*>(&cuArray3DCreate_v2)},
    {"cuArrayDestroy", reinterpret_cast<void*>(&cuArrayDestroy)},
    {"cuMemAllocAsync", reinterpret_cast<void*>(&cuMemAllocAsync)},
    {"cuMemAllocAsync_ptsz", reinterpret_cast<void*>(&cuMemAllocAsync_ptsz)},
    {"cuMemFreeAsync", reinterpret_cast<void*>(&cuMemFreeAsync)},
    {"cuMemFreeAsync_ptsz", reinterpret_cast<void*>(&cuMemFreeAsync_ptsz)},
    {"cuMemGetInfo_v2", reinterpret_cast<void*>(&cuMemGetInfo_v2)},
    {"cuGetProcAddress", reinterpret_cast<void*>(&cuGetProcAddress)},
    {"cuGetProcAddress_v2", reinterpret_cast<void*>(&cuGetProcAddress_v2)},
};

void* WrapperForSymbol(const char* name) {
  if (name == nullptr || name[0] != 'c' || name[1] != 'u') return nullptr;
  for (const Wrapped& w : kWrapped) {
    if (strcmp(w.name, name) == 0) return w.wrapper;
  }
  return nullptr;
}

// cuGetProcAddress takes base names ("cuMemAlloc") and the CUDA version the caller was built
// for; the driver answers with the matching version of the entry point. The _v2 entry points
// wrapped here are the ones for 3.2 and later; an older caller gets the driver's function
// unwrapped (the 32-bit API of CUDA 3.1, not limited).
struct ProcEntry {
  const char* base;
  int since;          // the first CUDA version the wrapper's entry point answers for
  void* wrapper;
  void* per_thread;   // the wrapper when the per-thread default stream is asked for
};

void* WrapperForProc(const char* symbol, int cuda_version, cuuint64_t flags) {
  if (symbol == nullptr) return nullptr;
  if (strcmp(symbol, "cuGetProcAddress") == 0) {
    return cuda_version >= 12000 ? reinterpret_cast<void*>(&cuGetProcAddress_v2)
                                 : reinterpret_cast<void*>(&cuGetProcAddress);
  }
  static const ProcEntry kProcs[] = {
      {"cuMemAlloc", 3020, reinterpret_cast<void*>(&cuMemAlloc_v2), nullptr},
      {"cuMemFree", 3020, reinterpret_cast<void*>(&cuMemFree_v2), nullptr},
      {"cuMemGetInfo", 3020, reinterpret_cast<void*>(&cuMemGetInfo_v2), nullptr},
      {"cuMemAllocPitch", 3020, reinterpret_cast<void*>(&cuMemAllocPitch_v2), nullptr},
      {"cuArrayCreate", 3020, reinterpret_cast<void*>(&cuArrayCreate_v2), nullptr},
      {"cuArray3DCreate", 3020, reinterpret_cast<void*>(&cuArray3DCreate_v2), nullptr},
      {"cuMemAllocManaged", 0, reinterpret_cast<void*>(&cuMemAllocManaged), nullptr},
      {"cuMemCreate", 0, reinterpret_cast<void*>(&cuMemCreate), nullptr},
      {"cuMemRelease", 0, reinterpret_cast<void*>(&cuMemRelease), nullptr},
      {"cuArrayDestroy", 0, reinterpret_cast<void*>(&cuArrayDestroy), nullptr},
      {"cuMemAllocAsync", 0, reinterpret_cast<void*>(&cuMemAllocAsync),
       reinterpret_cast<void*>(&cuMemAllocAsync_ptsz)},
      {"cuMemFreeAsync", 0, reinterpret_cast<void*>(&cuMemFreeAsync),
       reinterpret_cast<void*>(&cuMemFreeAsync_ptsz)},
  };
  for (const ProcEntry& e : kProcs) {
    if (strcmp(e.base, symbol) != 0) continue;
    if (cuda_version < e.since) return nullptr;
    if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0 && e.per_thread != nullptr) {
      return e.per_thread;
    }
    return e.wrapper;
  }
  return nullptr;
}

}  // namespace

GPUSCHED_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                          cuuint64_t flags) {
  REAL(GetProcAddressFn, "cuGetProcAddress");
  const CUresult r = real(symbol, pfn, cuda_version, flags);
  if (r == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr) {
    if (void* w = WrapperForProc(symbol, cuda_version, flags)) *pfn = w;
  }
  return r;
}

GPUSCHED_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                             cuuint64_t flags,
                                             CUdriverProcAddressQueryResult* status) {
  REAL(GetProcAddressV2Fn, "cuGetProcAddress_v2");
  const CUresult r = real(symbol, pfn, cuda_version, flags, status);
  if (r == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr) {
    if (void* w = WrapperForProc(symbol, cuda_version, flags)) *pfn = w;
  }
  return r;
}

// Every dlsym of the process comes here. A name this library wraps is answered with its
// wrapper when the real look-up finds the driver's function; any other name goes to the C
// library's dlsym as a sibling call (a jump, this library is built with -O2 always), so the
// caller's return address, which RTLD_NEXT is relative to, is the caller's own.
GPUSCHED_EXPORT void* dlsym(void* handle, const char* name) {
  const DlsymFn real = RealDlsym();
  void* const wrapper = WrapperForSymbol(name);
  if (wrapper == nullptr) return real(handle, name);
  return real(handle, name) != nullptr ? wrapper : nullptr;
}

// ------------------------------------------------------------ process life

namespace {

void AfterForkInChild() {
  g_table.ResetAfterFork();
  if (g_share.ledger != nullptr) g_share.ledger->ResetAfterFork();
}

__attribute__((constructor)) void OnLoad() { pthread_atfork(nullptr, nullptr, AfterForkInChild); }

// The driver frees a process's memory when it ends: so does the ledger.
__attribute__((destructor)) void OnUnload() {
  if (g_share.ledger != nullptr) g_share.ledger->LeaveProcess();
}

}  // namespace
