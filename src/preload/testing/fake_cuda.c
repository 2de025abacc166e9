// A fake CUDA driver, built as libcuda.so.1 for the preload library's tests only: the same
// symbols as the real driver for what the library wraps, with device memory as a counter
// (FAKE_CUDA_TOTAL_MIB per device, default 16384) and no limit of its own beyond it. It
// records the most ever held at once (fakecuda_peak_bytes), which the tests compare with the
// share. Thread-safe (one mutex).

#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "preload/cuda_types.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_ALLOCS 65536

struct FakeAlloc {
  unsigned long long key;  // 0 = free entry
  unsigned long long bytes;
  int kind;  // 1 pointer, 2 handle, 3 array, 4 mipmapped array, 5 IPC-opened pointer
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct FakeAlloc g_allocs[MAX_ALLOCS];
static unsigned long long g_in_use, g_peak, g_next_key = 0x7f0000000000ULL;
static __thread int g_device;

static unsigned long long TotalBytes(void) {
  const char* text = getenv("FAKE_CUDA_TOTAL_MIB");
  return (text != NULL ? strtoull(text, NULL, 10) : 16384ULL) << 20;
}

static CUresult Take(int kind, unsigned long long bytes, unsigned long long* key) {
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&g_mu);
  if (g_in_use + bytes <= TotalBytes()) {
    for (int i = 0; i < MAX_ALLOCS; ++i) {
      if (g_allocs[i].key != 0) continue;
      g_next_key += (bytes + 0xfff) & ~0xfffULL;
      g_next_key += 0x1000;
      g_allocs[i].key = g_next_key;
      g_allocs[i].bytes = bytes;
      g_allocs[i].kind = kind;
      *key = g_next_key;
      g_in_use += bytes;
      if (g_in_use > g_peak) g_peak = g_in_use;
      r = CUDA_SUCCESS;
      break;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

static CUresult Give(int kind, unsigned long long key) {
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < MAX_ALLOCS; ++i) {
    if (g_allocs[i].key != key || g_allocs[i].kind != kind) continue;
    g_in_use -= g_allocs[i].bytes;
    g_allocs[i].key = 0;
    r = CUDA_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

EXPORT CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
EXPORT CUresult cuCtxGetDevice(CUdevice* device) { *device = g_device; return CUDA_SUCCESS; }
// Test-only: which device the calling thread's "context" is on.
EXPORT void fakecuda_set_device(int device) { g_device = device; }
EXPORT unsigned long long fakecuda_in_use_bytes(void) {
  pthread_mutex_lock(&g_mu);
  unsigned long long v = g_in_use;
  pthread_mutex_unlock(&g_mu);
  return v;
}
EXPORT unsigned long long fakecuda_peak_bytes(void) {
  pthread_mutex_lock(&g_mu);
  unsigned long long v = g_peak;
  pthread_mutex_unlock(&g_mu);
  return v;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) { return Take(1, bytes, p); }
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) { return Give(1, p); }
EXPORT CUresult cuMemAllocManaged(CUdeviceptr* p, size_t bytes, unsigned int flags) {
  (void)flags;
  return Take(1, bytes, p);
}
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* p, size_t* pitch, size_t width, size_t height,
                                   unsigned int element) {
  (void)element;
  *pitch = (width + 511) & ~(size_t)511;
  return Take(1, (unsigned long long)*pitch * height, p);
}
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* h, size_t bytes,
                            const CUmemAllocationProp* prop, unsigned long long flags) {
  (void)prop;
  (void)flags;
  return Take(2, bytes, h);
}
EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) { return Give(2, h); }
EXPORT CUresult cuArrayCreate_v2(CUarray* a, const CUDA_ARRAY_DESCRIPTOR* d) {
  unsigned long long key = 0;
  CUresult r = Take(3, (unsigned long long)d->Width * (d->Height ? d->Height : 1) *
                           d->NumChannels * 4, &key);
  *a = (CUarray)(uintptr_t)key;
  return r;
}
EXPORT CUresult cuArray3DCreate_v2(CUarray* a, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  unsigned long long key = 0;
  CUresult r = Take(3, (unsigned long long)d->Width * (d->Height ? d->Height : 1) *
                           (d->Depth ? d->Depth : 1) * d->NumChannels * 4, &key);
  *a = (CUarray)(uintptr_t)key;
  return r;
}
EXPORT CUresult cuArrayDestroy(CUarray a) { return Give(3, (unsigned long long)(uintptr_t)a); }
EXPORT CUresult cuMemAllocAsync(CUdeviceptr* p, size_t bytes, CUstream s) {
  (void)s;
  return Take(1, bytes, p);
}
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* p, size_t bytes, CUstream s) {
  (void)s;
  return Take(1, bytes, p);
}
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  (void)s;
  return Give(1, p);
}
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) {
  (void)s;
  return Give(1, p);
}
EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  const unsigned long long total = TotalBytes();
  pthread_mutex_lock(&g_mu);
  *free_bytes = (size_t)(total - g_in_use);
  pthread_mutex_unlock(&g_mu);
  *total_bytes = (size_t)total;
  return CUDA_SUCCESS;
}


// ---------------------------------------------------------------- the newer entry points

static unsigned long long BytesOf(unsigned long long key) {
  unsigned long long bytes = 0;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < MAX_ALLOCS; ++i) {
    if (g_allocs[i].key == key) bytes = g_allocs[i].bytes;
  }
  pthread_mutex_unlock(&g_mu);
  return bytes;
}

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* a, const CUDA_ARRAY3D_DESCRIPTOR* d,
                                       unsigned int levels) {
  unsigned long long bytes = 0, w = d->Width, h = d->Height ? d->Height : 1,
                     z = d->Depth ? d->Depth : 1;
  for (unsigned l = 0; l < levels; ++l, w = w > 1 ? w / 2 : 1, h = h > 1 ? h / 2 : 1,
                z = z > 1 ? z / 2 : 1) {
    bytes += w * h * z * d->NumChannels * 4;
  }
  unsigned long long key = 0;
  CUresult r = Take(4, bytes, &key);
  *a = (CUmipmappedArray)(uintptr_t)key;
  return r;
}
EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray a) {
  return Give(4, (unsigned long long)(uintptr_t)a);
}

// Graphs: a graph is a number; an allocation node takes its memory at once (as a pointer:
// freed outside the graph with cuMemFree), a free node does nothing.
static unsigned long long g_next_graph = 0x1000;
EXPORT CUresult cuGraphCreate(CUgraph* g, unsigned int flags) {
  (void)flags;
  pthread_mutex_lock(&g_mu);
  *g = (CUgraph)(uintptr_t)(g_next_graph += 0x10);
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuGraphDestroy(CUgraph g) { return g != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
EXPORT CUresult cuGraphDestroyNode(CUgraphNode n) { (void)n; return CUDA_SUCCESS; }
EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* n, CUgraph g, const CUgraphNode* deps,
                                       size_t count, CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  (void)g, (void)deps, (void)count;
  *n = (CUgraphNode)(uintptr_t)0x42;
  return Take(1, p->bytesize, &p->dptr);
}
EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode* n, CUgraph g, const CUgraphNode* deps,
                                      size_t count, CUdeviceptr dptr) {
  (void)g, (void)deps, (void)count, (void)dptr;
  *n = (CUgraphNode)(uintptr_t)0x43;
  return CUDA_SUCCESS;
}
static CUresult AddNode(CUgraphNode* n, CUgraph g, CUgraphNodeParams* p) {
  if (p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) return cuGraphAddMemAllocNode(n, g, NULL, 0, &p->alloc);
  if (p->type == CU_GRAPH_NODE_TYPE_MEM_FREE) return cuGraphAddMemFreeNode(n, g, NULL, 0, p->free_dptr);
  return CUDA_ERROR_INVALID_VALUE;
}
EXPORT CUresult cuGraphAddNode(CUgraphNode* n, CUgraph g, const CUgraphNode* deps, size_t count,
                               CUgraphNodeParams* p) {
  (void)deps, (void)count;
  return AddNode(n, g, p);
}
EXPORT CUresult cuGraphAddNode_v2(CUgraphNode* n, CUgraph g, const CUgraphNode* deps,
                                  const CUgraphEdgeData* edges, size_t count, CUgraphNodeParams* p) {
  (void)deps, (void)edges, (void)count;
  return AddNode(n, g, p);
}

// Pools: a pool is a number; its allocations are pointers.
EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  (void)props;
  *pool = (CUmemoryPool)(uintptr_t)0x5000;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) { (void)pool; return CUDA_SUCCESS; }
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* p, size_t bytes, CUmemoryPool pool, CUstream s) {
  (void)pool, (void)s;
  return Take(1, bytes, p);
}
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* p, size_t bytes, CUmemoryPool pool,
                                             CUstream s) {
  (void)pool, (void)s;
  return Take(1, bytes, p);
}

// Sharing: an exported handle carries the allocation's size in its first 8 bytes (a test can
// forge one, as memory exported from outside the task); an import takes that much anew.
EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  const unsigned long long bytes = BytesOf(p);
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (base != NULL) *base = p;
  if (size != NULL) *size = (size_t)bytes;
  return CUDA_SUCCESS;
}
// Writes the export of `p` (its size, then its address) into the 64 bytes at `out`.
static CUresult Export(void* out, CUdeviceptr p) {
  const unsigned long long bytes = BytesOf(p);
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  memset(out, 0, 64);
  memcpy(out, &bytes, sizeof bytes);
  memcpy((char*)out + 8, &p, sizeof p);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr p) { return Export(h, p); }
static CUresult IpcOpen(CUdeviceptr* p, CUipcMemHandle h) {
  unsigned long long bytes = 0;
  memcpy(&bytes, h.reserved, sizeof bytes);
  return Take(5, bytes, p);
}
EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr* p, CUipcMemHandle h, unsigned int flags) {
  (void)flags;
  return IpcOpen(p, h);
}
EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* p, CUipcMemHandle h, unsigned int flags) {
  (void)flags;
  return IpcOpen(p, h);
}
EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr p) { return Give(5, p); }
EXPORT CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData* d, CUdeviceptr p) {
  return Export(d, p);
}
EXPORT CUresult cuMemPoolImportPointer(CUdeviceptr* p, CUmemoryPool pool, CUmemPoolPtrExportData* d) {
  (void)pool;
  unsigned long long bytes = 0;
  memcpy(&bytes, d->reserved, sizeof bytes);
  return Take(1, bytes, p);
}
// A POSIX descriptor export is a memfd holding the size.
EXPORT CUresult cuMemExportToShareableHandle(void* out, CUmemGenericAllocationHandle h,
                                             CUmemAllocationHandleType type,
                                             unsigned long long flags) {
  (void)flags;
  const unsigned long long bytes = BytesOf(h);
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  const int fd = memfd_create("fake-cuda-export", MFD_CLOEXEC);
  if (fd < 0 || pwrite(fd, &bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) return CUDA_ERROR_INVALID_VALUE;
  *(int*)out = fd;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* h, void* os_handle,
                                               CUmemAllocationHandleType type) {
  unsigned long long bytes = 0;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
      pread((int)(intptr_t)os_handle, &bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return Take(2, bytes, h);
}
EXPORT CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                         unsigned long long flags) {
  (void)p, (void)size, (void)offset, (void)flags;
  return BytesOf(h) != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t size) { (void)p, (void)size; return CUDA_SUCCESS; }

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult* status);
EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags);

// The driver's answer to cuGetProcAddress: a table, not dlsym (the preload library
// interposes dlsym, and the tests must see this answer unwrapped). The library is linked
// with -Bsymbolic, so the addresses below are this library's own functions, not the
// preload library's interposed ones, as in the real driver.
struct Proc {
  const char* base;
  int since;  // version from which this entry answers
  void* fn;
  void* per_thread;
};

static CUresult Lookup(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  const struct Proc procs[] = {
      {"cuInit", 2000, (void*)cuInit, NULL},
      {"cuCtxGetDevice", 2000, (void*)cuCtxGetDevice, NULL},
      {"cuMemAlloc", 3020, (void*)cuMemAlloc_v2, NULL},
      {"cuMemFree", 3020, (void*)cuMemFree_v2, NULL},
      {"cuMemGetInfo", 3020, (void*)cuMemGetInfo_v2, NULL},
      {"cuMemAllocPitch", 3020, (void*)cuMemAllocPitch_v2, NULL},
      {"cuArrayCreate", 3020, (void*)cuArrayCreate_v2, NULL},
      {"cuArray3DCreate", 3020, (void*)cuArray3DCreate_v2, NULL},
      {"cuArrayDestroy", 2000, (void*)cuArrayDestroy, NULL},
      {"cuMemAllocManaged", 6000, (void*)cuMemAllocManaged, NULL},
      {"cuMemCreate", 10020, (void*)cuMemCreate, NULL},
      {"cuMemRelease", 10020, (void*)cuMemRelease, NULL},
      {"cuMemAllocAsync", 11020, (void*)cuMemAllocAsync, (void*)cuMemAllocAsync_ptsz},
      {"cuMemFreeAsync", 11020, (void*)cuMemFreeAsync, (void*)cuMemFreeAsync_ptsz},
      {"cuMipmappedArrayCreate", 5000, (void*)cuMipmappedArrayCreate, NULL},
      {"cuMipmappedArrayDestroy", 5000, (void*)cuMipmappedArrayDestroy, NULL},
      {"cuGraphCreate", 10000, (void*)cuGraphCreate, NULL},
      {"cuGraphDestroy", 10000, (void*)cuGraphDestroy, NULL},
      {"cuGraphAddMemAllocNode", 11040, (void*)cuGraphAddMemAllocNode, NULL},
      {"cuGraphAddMemFreeNode", 11040, (void*)cuGraphAddMemFreeNode, NULL},
      {"cuGraphAddNode", 12030, (void*)cuGraphAddNode_v2, NULL},
      {"cuGraphAddNode", 12020, (void*)cuGraphAddNode, NULL},
      {"cuMemPoolCreate", 11020, (void*)cuMemPoolCreate, NULL},
      {"cuMemPoolDestroy", 11020, (void*)cuMemPoolDestroy, NULL},
      {"cuMemAllocFromPoolAsync", 11020, (void*)cuMemAllocFromPoolAsync,
       (void*)cuMemAllocFromPoolAsync_ptsz},
      {"cuMemGetAddressRange", 3020, (void*)cuMemGetAddressRange_v2, NULL},
      {"cuIpcGetMemHandle", 4010, (void*)cuIpcGetMemHandle, NULL},
      {"cuIpcOpenMemHandle", 11000, (void*)cuIpcOpenMemHandle_v2, NULL},
      {"cuIpcOpenMemHandle", 4010, (void*)cuIpcOpenMemHandle, NULL},
      {"cuIpcCloseMemHandle", 4010, (void*)cuIpcCloseMemHandle, NULL},
      {"cuMemPoolExportPointer", 11020, (void*)cuMemPoolExportPointer, NULL},
      {"cuMemPoolImportPointer", 11020, (void*)cuMemPoolImportPointer, NULL},
      {"cuMemExportToShareableHandle", 10020, (void*)cuMemExportToShareableHandle, NULL},
      {"cuMemImportFromShareableHandle", 10020, (void*)cuMemImportFromShareableHandle, NULL},
      {"cuMemMap", 10020, (void*)cuMemMap, NULL},
      {"cuMemUnmap", 10020, (void*)cuMemUnmap, NULL},
      {"cuGetProcAddress", 12000, (void*)cuGetProcAddress_v2, NULL},
      {"cuGetProcAddress", 11030, (void*)cuGetProcAddress, NULL},
  };
  for (size_t i = 0; i < sizeof procs / sizeof procs[0]; ++i) {
    if (strcmp(procs[i].base, symbol) != 0 || version < procs[i].since) continue;
    *pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && procs[i].per_thread
               ? procs[i].per_thread
               : procs[i].fn;
    return CUDA_SUCCESS;
  }
  *pfn = NULL;
  return CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return Lookup(symbol, pfn, version, flags);
}

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  CUresult r = Lookup(symbol, pfn, version, flags);
  if (status != NULL) *status = r == CUDA_SUCCESS ? 0 : 1;
  return r;
}
