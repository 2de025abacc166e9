// A fake NVML, built as libnvidia-ml.so.1 for the agent's tests only: the entry points
// gpu_discovery (nvml.cc) uses, answering from the environment, read at every call so a
// test can change what the "driver" sees:
//   FAKE_NVML_GPUS   "H200:143771,H200:143771" (name:total MiB per device; default one GPU)
//   FAKE_NVML_USED   "0:1024,1:0"              (device:MiB used, default 0)
//   FAKE_NVML_PROCS  "4242:0:700,4243:1:100"   (pid:device:MiB of compute processes)
//   FAKE_NVML_PROCS_FILE  a file holding such a list, read at each call (set: it wins), so
//                    a test can name the processes of tasks started after the agent
//   FAKE_NVML_LOST   "1"                        (devices whose queries fail: lost GPUs)
//   FAKE_NVML_UTIL   "4242:0:35,4242:0:80"      (pid:device:SM % utilisation samples)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_GPU_IS_LOST 15

typedef struct {
  unsigned long long total, free, used;
} FakeMemory;
typedef struct {  // nvmlProcessInfo_t (v2 / v3 layout)
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} FakeProcess;

static const char* Env(const char* name, const char* fallback) {
  const char* v = getenv(name);
  return v != NULL ? v : fallback;
}

// The `index`-th comma-separated item of `list` into buf; 0 when there is none.
static int Item(const char* list, int index, char* buf, size_t size) {
  for (int i = 0; *list != '\0'; ++i) {
    const char* end = strchr(list, ',');
    size_t len = end != NULL ? (size_t)(end - list) : strlen(list);
    if (i == index) {
      if (len >= size) len = size - 1;
      memcpy(buf, list, len);
      buf[len] = '\0';
      return 1;
    }
    if (end == NULL) break;
    list = end + 1;
  }
  return 0;
}

static unsigned Count(void) {
  char buf[64];
  unsigned n = 0;
  while (Item(Env("FAKE_NVML_GPUS", "FAKE:16384"), (int)n, buf, sizeof buf)) ++n;
  return n;
}

static int Lost(unsigned dev) {
  char buf[16];
  for (int i = 0; Item(Env("FAKE_NVML_LOST", ""), i, buf, sizeof buf); ++i) {
    if ((unsigned)atoi(buf) == dev) return 1;
  }
  return 0;
}

EXPORT int nvmlInit_v2(void) { return NVML_SUCCESS; }
EXPORT int nvmlShutdown(void) { return NVML_SUCCESS; }
EXPORT int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = Count();
  return NVML_SUCCESS;
}
// Handles are index + 1 (never null).
EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= Count()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = (void*)(size_t)(index + 1);
  return NVML_SUCCESS;
}
EXPORT int nvmlDeviceGetName(void* device, char* name, unsigned length) {
  char buf[64];
  const unsigned dev = (unsigned)(size_t)device - 1;
  if (!Item(Env("FAKE_NVML_GPUS", "FAKE:16384"), (int)dev, buf, sizeof buf)) return NVML_ERROR_INVALID_ARGUMENT;
  char* colon = strchr(buf, ':');
  if (colon != NULL) *colon = '\0';
  snprintf(name, length, "%s", buf);
  return NVML_SUCCESS;
}
EXPORT int nvmlDeviceGetMemoryInfo(void* device, FakeMemory* memory) {
  char buf[64];
  const unsigned dev = (unsigned)(size_t)device - 1;
  if (Lost(dev)) return NVML_ERROR_GPU_IS_LOST;
  if (!Item(Env("FAKE_NVML_GPUS", "FAKE:16384"), (int)dev, buf, sizeof buf)) return NVML_ERROR_INVALID_ARGUMENT;
  const char* colon = strchr(buf, ':');
  const unsigned long long total = (colon != NULL ? strtoull(colon + 1, NULL, 10) : 16384ULL) << 20;
  unsigned long long used = 0;
  for (int i = 0; Item(Env("FAKE_NVML_USED", ""), i, buf, sizeof buf); ++i) {
    unsigned d = 0;
    unsigned long long mib = 0;
    if (sscanf(buf, "%u:%llu", &d, &mib) == 2 && d == dev) used = mib << 20;
  }
  memory->total = total;
  memory->used = used;
  memory->free = total - used;
  return NVML_SUCCESS;
}
// FAKE_NVML_PROCS, or the contents of FAKE_NVML_PROCS_FILE (into `file_buf`).
static const char* ProcsList(char* file_buf, size_t size) {
  const char* path = getenv("FAKE_NVML_PROCS_FILE");
  if (path == NULL) return Env("FAKE_NVML_PROCS", "");
  FILE* f = fopen(path, "r");
  if (f == NULL) return "";
  size_t n = fread(file_buf, 1, size - 1, f);
  fclose(f);
  while (n > 0 && (file_buf[n - 1] == '\n' || file_buf[n - 1] == ' ')) --n;
  file_buf[n] = '\0';
  return file_buf;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned* count,
                                                   FakeProcess* infos) {
  char buf[64], file_buf[1024];
  const char* procs = ProcsList(file_buf, sizeof file_buf);
  const unsigned dev = (unsigned)(size_t)device - 1;
  if (Lost(dev)) return NVML_ERROR_GPU_IS_LOST;
  unsigned n = 0;
  for (int i = 0; Item(procs, i, buf, sizeof buf); ++i) {
    unsigned pid = 0, d = 0;
    unsigned long long mib = 0;
    if (sscanf(buf, "%u:%u:%llu", &pid, &d, &mib) != 3 || d != dev) continue;
    if (infos != NULL && n < *count) {
      infos[n].pid = pid;
      infos[n].usedGpuMemory = mib << 20;
      infos[n].gpuInstanceId = infos[n].computeInstanceId = 0xFFFFFFFFu;
    }
    ++n;
  }
  const int enough = infos != NULL && n <= *count;
  *count = n;
  return enough || n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

typedef struct {  // nvmlProcessUtilizationSample_t
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil, memUtil, encUtil, decUtil;
} FakeUtilSample;
// Every sample of FAKE_NVML_UTIL for the device, whatever lastSeenTimeStamp; NOT_FOUND (6)
// when there is none, as the driver answers when no process used the GPU since then.
EXPORT int nvmlDeviceGetProcessUtilization(void* device, FakeUtilSample* samples, unsigned* count,
                                           unsigned long long last_seen) {
  char buf[64];
  const unsigned dev = (unsigned)(size_t)device - 1;
  if (Lost(dev)) return NVML_ERROR_GPU_IS_LOST;
  unsigned n = 0;
  for (int i = 0; Item(Env("FAKE_NVML_UTIL", ""), i, buf, sizeof buf); ++i) {
    unsigned pid = 0, d = 0, sm = 0;
    if (sscanf(buf, "%u:%u:%u", &pid, &d, &sm) != 3 || d != dev) continue;
    if (samples != NULL && n < *count) {
      samples[n].pid = pid;
      samples[n].timeStamp = last_seen + 1;
      samples[n].smUtil = sm;
      samples[n].memUtil = samples[n].encUtil = samples[n].decUtil = 0;
    }
    ++n;
  }
  const int enough = samples != NULL && n <= *count;
  *count = n;
  if (n == 0) return 6;  // NVML_ERROR_NOT_FOUND
  return enough ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

// Events: FAKE_NVML_EVENTS "0:xid:79,1:xid:13,1:ecc" is delivered in order, each once.
static int g_events_delivered;
EXPORT int nvmlEventSetCreate(void** set) {
  *set = (void*)&g_events_delivered;
  return NVML_SUCCESS;
}
EXPORT int nvmlDeviceRegisterEvents(void* device, unsigned long long types, void* set) {
  (void)device;
  (void)types;
  (void)set;
  return NVML_SUCCESS;
}
EXPORT int nvmlEventSetFree(void* set) {
  (void)set;
  return NVML_SUCCESS;
}
typedef struct {
  void* device;
  unsigned long long eventType, eventData;
  unsigned int gpuInstanceId, computeInstanceId;
} FakeEvent;
EXPORT int nvmlEventSetWait_v2(void* set, FakeEvent* data, unsigned timeout_ms) {
  (void)set;
  (void)timeout_ms;
  char buf[64], kind[16] = "";
  if (!Item(Env("FAKE_NVML_EVENTS", ""), g_events_delivered, buf, sizeof buf)) return 10;  // TIMEOUT
  ++g_events_delivered;
  unsigned dev = 0;
  unsigned long long xid = 0;
  sscanf(buf, "%u:%15[a-z]:%llu", &dev, kind, &xid);
  data->device = (void*)(size_t)(dev + 1);
  data->eventType = strcmp(kind, "xid") == 0 ? 0x8 : 0x2;
  data->eventData = xid;
  return NVML_SUCCESS;
}

// Topology: FAKE_NVML_NUMA "0,0,1,1" (NUMA node per device; the common ancestor is NODE
// within one, SYSTEM across) and FAKE_NVML_NVLINK "0-1,2-3" (NVLink pairs).
static int NumaOf(unsigned dev) {
  char buf[16];
  return Item(Env("FAKE_NVML_NUMA", ""), (int)dev, buf, sizeof buf) ? atoi(buf) : 0;
}
EXPORT int nvmlDeviceGetNumaNodeId(void* device, unsigned* node) {
  *node = (unsigned)NumaOf((unsigned)(size_t)device - 1);
  return NVML_SUCCESS;
}
EXPORT int nvmlDeviceGetTopologyCommonAncestor(void* a, void* b, int* level) {
  *level = NumaOf((unsigned)(size_t)a - 1) == NumaOf((unsigned)(size_t)b - 1) ? 40 : 50;
  return NVML_SUCCESS;
}
EXPORT int nvmlDeviceGetP2PStatus(void* a, void* b, int cap, int* status) {
  char buf[16];
  const unsigned da = (unsigned)(size_t)a - 1, db = (unsigned)(size_t)b - 1;
  *status = 1;  // NOT_SUPPORTED
  for (int i = 0; cap == 3 && Item(Env("FAKE_NVML_NVLINK", ""), i, buf, sizeof buf); ++i) {
    unsigned x = 0, y = 0;
    if (sscanf(buf, "%u-%u", &x, &y) == 2 && ((x == da && y == db) || (x == db && y == da))) {
      *status = 0;
    }
  }
  return NVML_SUCCESS;
}
