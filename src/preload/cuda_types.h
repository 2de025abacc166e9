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
  CUDA_ERROR_INVALID_HANDLE = 400,
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

typedef struct CUmipmappedArray_st* CUmipmappedArray;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;

typedef struct {  // CUmemPoolProps_v1
  int allocType;
  int handleTypes;
  CUmemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
} CUmemPoolProps;
typedef struct CUmemAccessDesc_st CUmemAccessDesc;
typedef struct {  // CUDA_MEM_ALLOC_NODE_PARAMS_v1 and _v2 (the same layout)
  CUmemPoolProps poolProps;
  const CUmemAccessDesc* accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  CUdeviceptr dptr;  // out
} CUDA_MEM_ALLOC_NODE_PARAMS;

// CUgraphNodeParams (cuGraphAddNode, 12.2+): the type, then a union of each node type's
// parameters; only the memory allocation and free nodes are read.
enum { CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10, CU_GRAPH_NODE_TYPE_MEM_FREE = 11 };
typedef struct {
  int type;
  int reserved0[3];
  union {
    long long reserved1[29];
    CUDA_MEM_ALLOC_NODE_PARAMS alloc;
    CUdeviceptr free_dptr;  // CUDA_MEM_FREE_NODE_PARAMS
  };
  long long reserved2;
} CUgraphNodeParams;
typedef struct CUgraphEdgeData_st CUgraphEdgeData;

// Inter-process sharing: the opaque handles, and the exportable handle types read here.
enum { CU_IPC_HANDLE_SIZE = 64 };
typedef struct {
  char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;
typedef struct {
  unsigned char reserved[64];
} CUmemPoolPtrExportData;
typedef int CUmemAllocationHandleType;
enum { CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1, CU_MEM_HANDLE_TYPE_FABRIC = 8 };
typedef struct {
  unsigned char data[64];
} CUmemFabricHandle;

// cuGetProcAddress flags and (12.0+) query result.
enum { CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2 };
typedef int CUdriverProcAddressQueryResult;

#ifdef __cplusplus
}
static_assert(sizeof(CUmemPoolProps) == 88, "CUmemPoolProps_v1 is 88 bytes in cuda.h");
static_assert(sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == 120, "CUDA_MEM_ALLOC_NODE_PARAMS is 120 bytes");
static_assert(sizeof(CUgraphNodeParams) == 256, "CUgraphNodeParams is 256 bytes in cuda.h");
#endif
