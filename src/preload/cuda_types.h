#pragma once
// The subset of the CUDA driver API (cuda.h) the preload library wraps, declared here with
// the signatures and values of NVIDIA's public headers: the library builds without the CUDA
// toolkit and never links libcuda (it finds the real functions at run time). The test-only
// fake driver (testing/fake_cuda.c) implements the same declarations.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int CUresult;
enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_FOUND = 500,
};
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;  // CUdeviceptr_v2
typedef unsigned long long CUmemGenericAllocationHandle;
typedef unsigned long long cuuint64_t;
typedef struct CUarray_st* CUarray;
typedef struct CUstream_st* CUstream;

typedef enum { CU_MEM_LOCATION_TYPE_INVALID = 0, CU_MEM_LOCATION_TYPE_DEVICE = 1 } CUmemLocationType;
typedef struct {
  CUmemLocationType type;
  int id;
} CUmemLocation;
typedef struct {  // CUmemAllocationProp: only the leading fields are read
  int type;
  int requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;

typedef int CUarray_format;
typedef struct {  // CUDA_ARRAY_DESCRIPTOR_v2
  size_t Width;
  size_t Height;
  CUarray_format Format;
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct {  // CUDA_ARRAY3D_DESCRIPTOR_v2
  size_t Width;
  size_t Height;
  size_t Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

// cuGetProcAddress flags and (12.0+) query result.
enum { CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2 };
typedef int CUdriverProcAddressQueryResult;

#ifdef __cplusplus
}
#endif
