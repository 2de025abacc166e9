// A fake CUDA driver, built as libcuda.so.1 for the preload library's tests only: the same
// symbols as the real driver for what the library wraps, with device memory as a counter
// (FAKE_CUDA_TOTAL_MIB per device, default 16384) and no limit of its own beyond it. It
// records the most ever held at once (fakecuda_peak_bytes), which the tests compare with the
// share. Thread-safe (one mutex).

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "preload/cuda_types.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_ALLOCS 65536

struct FakeAlloc {
  unsigned long long key;  // 0 = free entry
  unsigned long long bytes;
  int kind;                // 1 pointer, 2 handle, 3 array
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
