// libgpusched_preload.so: holds a task to its GPU-memory share (CN109992422A places tasks by
// GPU memory and lets them share a GPU, claim 2; this is what makes the share hold).
//
// Injected with LD_PRELOAD by the agent. It exports the CUDA driver API's allocation entry
// points under their real names, so a program linked against libcuda binds to these; and it
// exports dlsym and wraps cuGetProcAddress(_v2), so a program (or the CUDA runtime) that
// loads libcuda with dlopen and looks the functions up gets these too. Each wrapper charges
// the request against the task's share (MiB per visible device, comma separated) in the
// ShareLedger before calling the real function, found with the real dlsym
// in libcuda.so.1. The share comes from the agent's share file (an inherited descriptor,
// share_file.h) when there is one, the variable only otherwise, and is read when the library
// loads. See README.md for what is isolated and what is not.

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/allocation_table.h"
#include "preload/cuda_types.h"
#include "preload/share_file.h"
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
  bool limited = false;  // a share is known: every allocation is charged
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

// Where the share came from, read when the library loads (before the program's main can
// touch its environment or descriptors).
enum class ShareSource { kNone, kEnv, kFile, kUntrustedFile };
struct ShareText {
  ShareSource source = ShareSource::kNone;
  char text[256] = {};
};
ShareText g_share_text;

// The share file at kShareFd (share_file.h): kFile when trustworthy, kUntrustedFile when it
// carries the magic but the task could have written it, kNone when there is no share file
// there (no descriptor, or one that is not the agent's).
ShareSource ReadShareFile(char* text, size_t size) {
  struct stat st;
  if (fstat(kShareFd, &st) != 0 || !S_ISREG(st.st_mode)) return ShareSource::kNone;
  char buf[256];
  const ssize_t n = pread(kShareFd, buf, sizeof buf - 1, 0);
  const size_t magic = sizeof kShareFileMagic - 1;
  if (n < static_cast<ssize_t>(magic) || memcmp(buf, kShareFileMagic, magic) != 0) {
    return ShareSource::kNone;
  }
  buf[n] = '\0';
  const uid_t me = geteuid();
  if (st.st_uid == me && me != 0) return ShareSource::kNone;  // the task's own: no authority
  if ((st.st_mode & 0222) != 0) return ShareSource::kUntrustedFile;
  char* end = strchr(buf + magic, '\n');
  if (end != nullptr) *end = '\0';
  snprintf(text, size, "%s", buf + magic);
  return ShareSource::kFile;
}

void ReadShareSource() {
  ShareText& t = g_share_text;
  t.source = ReadShareFile(t.text, sizeof t.text);
  if (t.source != ShareSource::kNone) return;
  const char* env = getenv("GPUSCHED_GPU_MEM_MIB");  // no share file: the fallback
  if (env == nullptr || env[0] == '\0') return;
  t.source = ShareSource::kEnv;
  snprintf(t.text, sizeof t.text, "%s", env);
}

void InitShare() {
  const ShareText& t = g_share_text;
  if (t.source == ShareSource::kNone) return;  // no share: the wrappers pass through
  g_share.limited = true;
  char msg[320];
  if (t.source == ShareSource::kUntrustedFile) {
    snprintf(msg, sizeof msg, "gpusched preload: the share file (descriptor %d) is writable; "
             "refusing every GPU allocation\n", kShareFd);
    Say(msg);
    g_share.invalid = true;
    return;
  }
  if (!ParseShare(t.text, &g_share)) {
    snprintf(msg, sizeof msg,
             "gpusched preload: %s\"%.64s\" is not MiB per device (e.g. \"4096\" or "
             "\"4096,4096\"); refusing every GPU allocation\n",
             t.source == ShareSource::kFile ? "the share file's " : "GPUSCHED_GPU_MEM_MIB=",
             t.text);
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

// Gives back what (kind, key) was charged; false when it was not charged.
bool Uncharge(AllocKind kind, uint64_t key) {
  const Share& share = TheShare();
  if (!share.limited || share.ledger == nullptr) return false;
  const Charged c = g_table.Remove(kind, key);
  if (c.device >= 0) share.ledger->Release(c.device, c.bytes);
  return c.device >= 0;
}

// A device pointer freed with cuMemFree or cuMemFreeAsync: an allocation of its own, or a
// graph's allocation freed outside the graph.
void UnchargePointer(CUdeviceptr dptr) {
  if (!Uncharge(AllocKind::kDevicePtr, dptr)) Uncharge(AllocKind::kGraphAlloc, dptr);
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
  if (r == CUDA_SUCCESS) UnchargePointer(dptr);
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
  if (r == CUDA_SUCCESS && !Uncharge(AllocKind::kHandle, handle)) {
    g_table.Remove(AllocKind::kImportedHandle, handle);
  }
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
  if (r == CUDA_SUCCESS) UnchargePointer(dptr);
  return r;
}

GPUSCHED_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  REAL(MemFreeAsyncFn, "cuMemFreeAsync_ptsz");
  const CUresult r = real(dptr, stream);
  if (r == CUDA_SUCCESS) UnchargePointer(dptr);
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

// ------------------------------------------------------------ mipmapped arrays

using MipmappedArrayCreateFn = CUresult (*)(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*,
                                            unsigned int);
using MipmappedArrayDestroyFn = CUresult (*)(CUmipmappedArray);

GPUSCHED_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array);

// Every level, each half the one above in each dimension it has (at least 1). More levels
// than the dimensions allow are the driver's to refuse; at most 64 are counted.
static uint64_t MipmapBytes(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels) {
  uint64_t total = 0;
  size_t w = d.Width, h = d.Height, z = d.Depth;
  for (unsigned l = 0; l < levels && l < 64; ++l) {
    total += ArrayBytes(w, h, z, d.Format, d.NumChannels);
    w = w > 1 ? w / 2 : w;
    h = h > 1 ? h / 2 : h;
    z = z > 1 && (d.Flags & 0x01) == 0 ? z / 2 : z;  // CUDA_ARRAY3D_LAYERED keeps its layers
  }
  return total;
}

GPUSCHED_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* array,
                                                const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                                unsigned int levels) {
  REAL(MipmappedArrayCreateFn, "cuMipmappedArrayCreate");
  if (array == nullptr || desc == nullptr) return real(array, desc, levels);
  return ChargeAndAllocate(
      CurrentDevice(), MipmapBytes(*desc, levels), AllocKind::kMipmap,
      [&](uint64_t* key) {
        const CUresult r = real(array, desc, levels);
        if (key != nullptr) *key = reinterpret_cast<uintptr_t>(*array);
        return r;
      },
      [](uint64_t key) { cuMipmappedArrayDestroy(reinterpret_cast<CUmipmappedArray>(key)); });
}

GPUSCHED_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  REAL(MipmappedArrayDestroyFn, "cuMipmappedArrayDestroy");
  const CUresult r = real(array);
  if (r == CUDA_SUCCESS) Uncharge(AllocKind::kMipmap, reinterpret_cast<uintptr_t>(array));
  return r;
}

// ------------------------------------------------------------ graph memory nodes

// A graph's allocation node is charged when it is added (its memory exists whenever the
// graph runs) and given back when it is freed outside the graph (cuMemFree(Async)), or,
// when the graph has a free node for it, when the graph is destroyed.
using GraphAddMemAllocNodeFn = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                            CUDA_MEM_ALLOC_NODE_PARAMS*);
using GraphAddMemFreeNodeFn = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                           CUdeviceptr);
using GraphAddNodeFn = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                    CUgraphNodeParams*);
using GraphAddNodeV2Fn = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*,
                                      const CUgraphEdgeData*, size_t, CUgraphNodeParams*);
using GraphDestroyFn = CUresult (*)(CUgraph);
using GraphDestroyNodeFn = CUresult (*)(CUgraphNode);

template <typename Call>
static CUresult ChargedGraphAlloc(CUgraph graph, CUgraphNode* node,
                                  CUDA_MEM_ALLOC_NODE_PARAMS* params, Call call) {
  const int device = params->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE
                         ? params->poolProps.location.id
                         : CurrentDevice();
  const Share& share = TheShare();
  if (!share.limited) return call();
  if (share.invalid || !share.ledger->Charge(device, params->bytesize, LimitOf(share, device))) {
    return Refuse(share, device, params->bytesize);
  }
  const CUresult r = call();
  Charged charged{device, params->bytesize, reinterpret_cast<uintptr_t>(graph), false};
  if (r == CUDA_SUCCESS && g_table.Insert(AllocKind::kGraphAlloc, params->dptr, charged)) {
    return r;
  }
  share.ledger->Release(device, params->bytesize);
  if (r != CUDA_SUCCESS) return r;
  static GraphDestroyNodeFn destroy = nullptr;
  if (GraphDestroyNodeFn fn = Resolve(&destroy, "cuGraphDestroyNode")) fn(*node);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

static void NoteGraphFree(CUdeviceptr dptr) {
  if (TheShare().limited) g_table.MarkFreedInOwner(AllocKind::kGraphAlloc, dptr);
}

GPUSCHED_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph,
                                                const CUgraphNode* deps, size_t count,
                                                CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  REAL(GraphAddMemAllocNodeFn, "cuGraphAddMemAllocNode");
  if (node == nullptr || params == nullptr) return real(node, graph, deps, count, params);
  return ChargedGraphAlloc(graph, node, params,
                           [&] { return real(node, graph, deps, count, params); });
}

GPUSCHED_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode* node, CUgraph graph,
                                               const CUgraphNode* deps, size_t count,
                                               CUdeviceptr dptr) {
  REAL(GraphAddMemFreeNodeFn, "cuGraphAddMemFreeNode");
  const CUresult r = real(node, graph, deps, count, dptr);
  if (r == CUDA_SUCCESS) NoteGraphFree(dptr);
  return r;
}

// cuGraphAddNode (12.2) and _v2 (12.3, with edge data) add any kind of node.
template <typename Call>
static CUresult AddNode(CUgraphNode* node, CUgraph graph, CUgraphNodeParams* params, Call call) {
  if (node == nullptr || params == nullptr) return call();
  if (params->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    return ChargedGraphAlloc(graph, node, &params->alloc, call);
  }
  const CUresult r = call();
  if (r == CUDA_SUCCESS && params->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
    NoteGraphFree(params->free_dptr);
  }
  return r;
}

GPUSCHED_EXPORT CUresult cuGraphAddNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                        size_t count, CUgraphNodeParams* params) {
  REAL(GraphAddNodeFn, "cuGraphAddNode");
  return AddNode(node, graph, params, [&] { return real(node, graph, deps, count, params); });
}

GPUSCHED_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode* node, CUgraph graph,
                                           const CUgraphNode* deps, const CUgraphEdgeData* edges,
                                           size_t count, CUgraphNodeParams* params) {
  REAL(GraphAddNodeV2Fn, "cuGraphAddNode_v2");
  return AddNode(node, graph, params,
                 [&] { return real(node, graph, deps, edges, count, params); });
}

GPUSCHED_EXPORT CUresult cuGraphDestroy(CUgraph graph) {
  REAL(GraphDestroyFn, "cuGraphDestroy");
  const CUresult r = real(graph);
  const Share& share = TheShare();
  if (r != CUDA_SUCCESS || !share.limited || share.ledger == nullptr) return r;
  g_table.RemoveFreedInOwner(AllocKind::kGraphAlloc, reinterpret_cast<uintptr_t>(graph),
                             [](const Charged& c) { g_share.ledger->Release(c.device, c.bytes); });
  return r;
}

// ------------------------------------------------------------ memory pools

// A pool created here remembers its device; an allocation from a pool that was not (a
// device's default pool) is charged to the current device.
using MemPoolCreateFn = CUresult (*)(CUmemoryPool*, const CUmemPoolProps*);
using MemPoolDestroyFn = CUresult (*)(CUmemoryPool);
using MemAllocFromPoolAsyncFn = CUresult (*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);

GPUSCHED_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  REAL(MemPoolCreateFn, "cuMemPoolCreate");
  const CUresult r = real(pool, props);
  if (r == CUDA_SUCCESS && pool != nullptr && props != nullptr && TheShare().limited &&
      props->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    g_table.Insert(AllocKind::kPool, reinterpret_cast<uintptr_t>(*pool),
                   {props->location.id, 0, 0, false});
  }
  return r;
}

GPUSCHED_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  REAL(MemPoolDestroyFn, "cuMemPoolDestroy");
  const CUresult r = real(pool);
  if (r == CUDA_SUCCESS) g_table.Remove(AllocKind::kPool, reinterpret_cast<uintptr_t>(pool));
  return r;
}

static int PoolDevice(CUmemoryPool pool) {
  const Charged c = g_table.Get(AllocKind::kPool, reinterpret_cast<uintptr_t>(pool));
  return c.device >= 0 ? c.device : CurrentDevice();
}

static CUresult AllocFromPool(MemAllocFromPoolAsyncFn real, CUdeviceptr* dptr, size_t bytes,
                              CUmemoryPool pool, CUstream stream) {
  if (dptr == nullptr) return real(dptr, bytes, pool, stream);
  return ChargeAndAllocate(PoolDevice(pool), bytes, AllocKind::kDevicePtr,
                           [&](uint64_t* key) {
                             const CUresult r = real(dptr, bytes, pool, stream);
                             if (key != nullptr) *key = *dptr;
                             return r;
                           },
                           [](uint64_t key) { cuMemFree_v2(key); });
}

GPUSCHED_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes,
                                                 CUmemoryPool pool, CUstream stream) {
  REAL(MemAllocFromPoolAsyncFn, "cuMemAllocFromPoolAsync");
  return AllocFromPool(real, dptr, bytes, pool, stream);
}

GPUSCHED_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                                      CUmemoryPool pool, CUstream stream) {
  REAL(MemAllocFromPoolAsyncFn, "cuMemAllocFromPoolAsync_ptsz");
  return AllocFromPool(real, dptr, bytes, pool, stream);
}

// ------------------------------------------------------------ imports from other processes

// Memory another process exported is charged to the importer unless a process of this task
// exported it (then it is charged already, to the exporter): exports are listed in the
// ledger by fingerprint (the handle's bytes; for a file descriptor, its file's identity).
using IpcGetMemHandleFn = CUresult (*)(CUipcMemHandle*, CUdeviceptr);
using IpcOpenMemHandleFn = CUresult (*)(CUdeviceptr*, CUipcMemHandle, unsigned int);
using IpcCloseMemHandleFn = CUresult (*)(CUdeviceptr);
using MemGetAddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
using MemPoolExportPointerFn = CUresult (*)(CUmemPoolPtrExportData*, CUdeviceptr);
using MemPoolImportPointerFn = CUresult (*)(CUdeviceptr*, CUmemoryPool, CUmemPoolPtrExportData*);
using MemExportToShareableHandleFn = CUresult (*)(void*, CUmemGenericAllocationHandle,
                                                  CUmemAllocationHandleType, unsigned long long);
using MemImportFromShareableHandleFn = CUresult (*)(CUmemGenericAllocationHandle*, void*,
                                                    CUmemAllocationHandleType);
using MemMapFn = CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                              unsigned long long);
using MemUnmapFn = CUresult (*)(CUdeviceptr, size_t);

static uint64_t Fingerprint(const void* bytes, size_t size) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (size_t i = 0; i < size; ++i) {
    h = (h ^ static_cast<const unsigned char*>(bytes)[i]) * 1099511628211ULL;
  }
  return h == 0 ? 1 : h;
}

static uint64_t FingerprintOf(const void* handle, CUmemAllocationHandleType type) {
  if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    struct stat st;
    if (fstat(static_cast<int>(reinterpret_cast<intptr_t>(handle)), &st) != 0) return 0;
    const uint64_t id[2] = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
    return Fingerprint(id, sizeof id);
  }
  if (type == CU_MEM_HANDLE_TYPE_FABRIC && handle != nullptr) {
    return Fingerprint(handle, sizeof(CUmemFabricHandle));
  }
  return 0;  // other types (Win32, none): never found among exports, so charged
}

static void NoteExported(uint64_t print) {
  const Share& share = TheShare();
  if (share.limited && share.ledger != nullptr && print != 0) share.ledger->NoteExported(print);
}

static bool ExportedByTheTask(uint64_t print) {
  const Share& share = TheShare();
  return share.ledger != nullptr && share.ledger->WasExported(print);
}

// Charges what `open` mapped at *dptr (its size from the driver) under (kind, *dptr); when
// it does not fit, `close` unmaps it again and the import is refused.
template <typename Open, typename Close>
static CUresult ChargeImport(CUdeviceptr* dptr, int device, AllocKind kind, Open open,
                             Close close) {
  const Share& share = TheShare();
  const CUresult r = open();
  if (r != CUDA_SUCCESS || !share.limited) return r;
  static MemGetAddressRangeFn range = nullptr;
  MemGetAddressRangeFn get_range = Resolve(&range, "cuMemGetAddressRange_v2");
  CUdeviceptr base = 0;
  size_t bytes = 0;
  if (get_range == nullptr || get_range(&base, &bytes, *dptr) != CUDA_SUCCESS) bytes = 0;
  const bool charged =
      !share.invalid && share.ledger->Charge(device, bytes, LimitOf(share, device));
  if (charged && g_table.Insert(kind, *dptr, {device, bytes, 0, false})) return r;
  if (charged) share.ledger->Release(device, bytes);
  close(*dptr);
  *dptr = 0;
  return Refuse(share, device, bytes);
}

GPUSCHED_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  REAL(IpcGetMemHandleFn, "cuIpcGetMemHandle");
  const CUresult r = real(handle, dptr);
  if (r == CUDA_SUCCESS && handle != nullptr) NoteExported(Fingerprint(handle, sizeof *handle));
  return r;
}

GPUSCHED_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  REAL(IpcCloseMemHandleFn, "cuIpcCloseMemHandle");
  const CUresult r = real(dptr);
  if (r == CUDA_SUCCESS) Uncharge(AllocKind::kIpcPtr, dptr);
  return r;
}

static CUresult IpcOpen(IpcOpenMemHandleFn real, CUdeviceptr* dptr, CUipcMemHandle handle,
                        unsigned int flags) {
  if (dptr == nullptr || ExportedByTheTask(Fingerprint(&handle, sizeof handle))) {
    return real(dptr, handle, flags);
  }
  return ChargeImport(dptr, CurrentDevice(), AllocKind::kIpcPtr,
                      [&] { return real(dptr, handle, flags); },
                      [](CUdeviceptr p) {
                        static IpcCloseMemHandleFn c = nullptr;
                        if (IpcCloseMemHandleFn fn = Resolve(&c, "cuIpcCloseMemHandle")) fn(p);
                      });
}

GPUSCHED_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr* dptr, CUipcMemHandle handle,
                                            unsigned int flags) {
  REAL(IpcOpenMemHandleFn, "cuIpcOpenMemHandle");
  return IpcOpen(real, dptr, handle, flags);
}

GPUSCHED_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* dptr, CUipcMemHandle handle,
                                               unsigned int flags) {
  REAL(IpcOpenMemHandleFn, "cuIpcOpenMemHandle_v2");
  return IpcOpen(real, dptr, handle, flags);
}

GPUSCHED_EXPORT CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData* data, CUdeviceptr dptr) {
  REAL(MemPoolExportPointerFn, "cuMemPoolExportPointer");
  const CUresult r = real(data, dptr);
  if (r == CUDA_SUCCESS && data != nullptr) NoteExported(Fingerprint(data, sizeof *data));
  return r;
}

// An imported pool pointer is freed with cuMemFree(Async): it is keyed as a device pointer.
GPUSCHED_EXPORT CUresult cuMemPoolImportPointer(CUdeviceptr* dptr, CUmemoryPool pool,
                                                CUmemPoolPtrExportData* data) {
  REAL(MemPoolImportPointerFn, "cuMemPoolImportPointer");
  if (dptr == nullptr || data == nullptr || ExportedByTheTask(Fingerprint(data, sizeof *data))) {
    return real(dptr, pool, data);
  }
  return ChargeImport(dptr, PoolDevice(pool), AllocKind::kDevicePtr,
                      [&] { return real(dptr, pool, data); },
                      [](CUdeviceptr p) {
                        static MemFreeFn f = nullptr;
                        if (MemFreeFn fn = Resolve(&f, "cuMemFree_v2")) fn(p);
                      });
}

GPUSCHED_EXPORT CUresult cuMemExportToShareableHandle(void* shareable,
                                                      CUmemGenericAllocationHandle handle,
                                                      CUmemAllocationHandleType type,
                                                      unsigned long long flags) {
  REAL(MemExportToShareableHandleFn, "cuMemExportToShareableHandle");
  const CUresult r = real(shareable, handle, type, flags);
  if (r != CUDA_SUCCESS || shareable == nullptr) return r;
  const void* os_handle = type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
                              ? reinterpret_cast<void*>(static_cast<intptr_t>(
                                    *static_cast<int*>(shareable)))
                              : shareable;
  NoteExported(FingerprintOf(os_handle, type));
  return r;
}

// The size of an imported VMM handle is known only when it is mapped: a handle from outside
// the task is remembered here and each mapping of it is charged (cuMemMap) until unmapped.
GPUSCHED_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                                        void* os_handle,
                                                        CUmemAllocationHandleType type) {
  REAL(MemImportFromShareableHandleFn, "cuMemImportFromShareableHandle");
  const bool charge = TheShare().limited && !ExportedByTheTask(FingerprintOf(os_handle, type));
  const CUresult r = real(handle, os_handle, type);
  if (r == CUDA_SUCCESS && handle != nullptr && charge) {
    g_table.Insert(AllocKind::kImportedHandle, *handle, {CurrentDevice(), 0, 0, false});
  }
  return r;
}

GPUSCHED_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                  CUmemGenericAllocationHandle handle, unsigned long long flags) {
  REAL(MemMapFn, "cuMemMap");
  const Charged imported = g_table.Get(AllocKind::kImportedHandle, handle);
  if (imported.device < 0) return real(ptr, size, offset, handle, flags);
  return ChargeAndAllocate(imported.device, size, AllocKind::kMapping,
                           [&](uint64_t* key) {
                             if (key != nullptr) *key = ptr;
                             return real(ptr, size, offset, handle, flags);
                           },
                           [size](uint64_t key) {
                             static MemUnmapFn u = nullptr;
                             if (MemUnmapFn fn = Resolve(&u, "cuMemUnmap")) fn(key, size);
                           });
}

GPUSCHED_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  REAL(MemUnmapFn, "cuMemUnmap");
  const CUresult r = real(ptr, size);
  if (r == CUDA_SUCCESS) Uncharge(AllocKind::kMapping, ptr);
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
    {"cuMipmappedArrayCreate", reinterpret_cast<void*>(&cuMipmappedArrayCreate)},
    {"cuMipmappedArrayDestroy", reinterpret_cast<void*>(&cuMipmappedArrayDestroy)},
    {"cuGraphAddMemAllocNode", reinterpret_cast<void*>(&cuGraphAddMemAllocNode)},
    {"cuGraphAddMemFreeNode", reinterpret_cast<void*>(&cuGraphAddMemFreeNode)},
    {"cuGraphAddNode", reinterpret_cast<void*>(&cuGraphAddNode)},
    {"cuGraphAddNode_v2", reinterpret_cast<void*>(&cuGraphAddNode_v2)},
    {"cuGraphDestroy", reinterpret_cast<void*>(&cuGraphDestroy)},
    {"cuMemPoolCreate", reinterpret_cast<void*>(&cuMemPoolCreate)},
    {"cuMemPoolDestroy", reinterpret_cast<void*>(&cuMemPoolDestroy)},
    {"cuMemAllocFromPoolAsync", reinterpret_cast<void*>(&cuMemAllocFromPoolAsync)},
    {"cuMemAllocFromPoolAsync_ptsz", reinterpret_cast<void*>(&cuMemAllocFromPoolAsync_ptsz)},
    {"cuIpcGetMemHandle", reinterpret_cast<void*>(&cuIpcGetMemHandle)},
    {"cuIpcOpenMemHandle", reinterpret_cast<void*>(&cuIpcOpenMemHandle)},
    {"cuIpcOpenMemHandle_v2", reinterpret_cast<void*>(&cuIpcOpenMemHandle_v2)},
    {"cuIpcCloseMemHandle", reinterpret_cast<void*>(&cuIpcCloseMemHandle)},
    {"cuMemPoolExportPointer", reinterpret_cast<void*>(&cuMemPoolExportPointer)},
    {"cuMemPoolImportPointer", reinterpret_cast<void*>(&cuMemPoolImportPointer)},
    {"cuMemExportToShareableHandle", reinterpret_cast<void*>(&cuMemExportToShareableHandle)},
    {"cuMemImportFromShareableHandle", reinterpret_cast<void*>(&cuMemImportFromShareableHandle)},
    {"cuMemMap", reinterpret_cast<void*>(&cuMemMap)},
    {"cuMemUnmap", reinterpret_cast<void*>(&cuMemUnmap)},
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
// unwrapped (the 32-bit API of CUDA 3.1, not limited). Where a name has two versions with
// wrappers (cuGraphAddNode, cuIpcOpenMemHandle) the newer entry comes first.
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
      {"cuMipmappedArrayCreate", 0, reinterpret_cast<void*>(&cuMipmappedArrayCreate), nullptr},
      {"cuMipmappedArrayDestroy", 0, reinterpret_cast<void*>(&cuMipmappedArrayDestroy), nullptr},
      {"cuGraphAddMemAllocNode", 0, reinterpret_cast<void*>(&cuGraphAddMemAllocNode), nullptr},
      {"cuGraphAddMemFreeNode", 0, reinterpret_cast<void*>(&cuGraphAddMemFreeNode), nullptr},
      {"cuGraphAddNode", 12030, reinterpret_cast<void*>(&cuGraphAddNode_v2), nullptr},
      {"cuGraphAddNode", 0, reinterpret_cast<void*>(&cuGraphAddNode), nullptr},
      {"cuGraphDestroy", 0, reinterpret_cast<void*>(&cuGraphDestroy), nullptr},
      {"cuMemPoolCreate", 0, reinterpret_cast<void*>(&cuMemPoolCreate), nullptr},
      {"cuMemPoolDestroy", 0, reinterpret_cast<void*>(&cuMemPoolDestroy), nullptr},
      {"cuMemAllocFromPoolAsync", 0, reinterpret_cast<void*>(&cuMemAllocFromPoolAsync), reinterpret_cast<void*>(&cuMemAllocFromPoolAsync_ptsz)},
      {"cuIpcGetMemHandle", 0, reinterpret_cast<void*>(&cuIpcGetMemHandle), nullptr},
      {"cuIpcOpenMemHandle", 11000, reinterpret_cast<void*>(&cuIpcOpenMemHandle_v2), nullptr},
      {"cuIpcOpenMemHandle", 0, reinterpret_cast<void*>(&cuIpcOpenMemHandle), nullptr},
      {"cuIpcCloseMemHandle", 0, reinterpret_cast<void*>(&cuIpcCloseMemHandle), nullptr},
      {"cuMemPoolExportPointer", 0, reinterpret_cast<void*>(&cuMemPoolExportPointer), nullptr},
      {"cuMemPoolImportPointer", 0, reinterpret_cast<void*>(&cuMemPoolImportPointer), nullptr},
      {"cuMemExportToShareableHandle", 0, reinterpret_cast<void*>(&cuMemExportToShareableHandle), nullptr},
      {"cuMemImportFromShareableHandle", 0, reinterpret_cast<void*>(&cuMemImportFromShareableHandle), nullptr},
      {"cuMemMap", 0, reinterpret_cast<void*>(&cuMemMap), nullptr},
      {"cuMemUnmap", 0, reinterpret_cast<void*>(&cuMemUnmap), nullptr},
  };
  for (const ProcEntry& e : kProcs) {
    // The first entry of the name the caller's version reaches (newer entries come first).
    if (strcmp(e.base, symbol) != 0 || cuda_version < e.since) continue;
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

__attribute__((constructor)) void OnLoad() {
  ReadShareSource();
  pthread_atfork(nullptr, nullptr, AfterForkInChild);
}

// The driver frees a process's memory when it ends: so does the ledger.
__attribute__((destructor)) void OnUnload() {
  if (g_share.ledger != nullptr) g_share.ledger->LeaveProcess();
}

}  // namespace
