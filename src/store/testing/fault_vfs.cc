#include "store/testing/fault_vfs.h"

#include <sqlite3.h>

#include <atomic>
#include <mutex>

namespace gpusched::store::testing {
namespace {

std::atomic<int64_t> g_writes_left{-1};  // -1 = no fault armed
std::atomic<int64_t> g_failed{0};
std::atomic<bool> g_fail_syncs{false};
std::atomic<int64_t> g_syncs{0};

sqlite3_vfs* Real(sqlite3_vfs* vfs) { return static_cast<sqlite3_vfs*>(vfs->pAppData); }

// Our file wraps the real one, which lives right after it in the same allocation.
struct FaultFile {
  sqlite3_file base;
  sqlite3_file* real;
};

sqlite3_file* R(sqlite3_file* f) { return reinterpret_cast<FaultFile*>(f)->real; }

bool ShouldFail() {
  int64_t left = g_writes_left.load();
  while (left >= 0) {
    if (left == 0) {
      ++g_failed;
      return true;
    }
    if (g_writes_left.compare_exchange_weak(left, left - 1)) return false;
  }
  return false;
}

int Close(sqlite3_file* f) {
  const int rc = R(f)->pMethods != nullptr ? R(f)->pMethods->xClose(R(f)) : SQLITE_OK;
  return rc;
}
int Read(sqlite3_file* f, void* p, int n, sqlite3_int64 off) {
  return R(f)->pMethods->xRead(R(f), p, n, off);
}
int Write(sqlite3_file* f, const void* p, int n, sqlite3_int64 off) {
  if (ShouldFail()) return SQLITE_IOERR_WRITE;
  return R(f)->pMethods->xWrite(R(f), p, n, off);
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) {
  return R(f)->pMethods->xTruncate(R(f), size);
}
int Sync(sqlite3_file* f, int flags) {
  ++g_syncs;
  if (g_fail_syncs.load()) return SQLITE_IOERR_FSYNC;
  return R(f)->pMethods->xSync(R(f), flags);
}
int FileSize(sqlite3_file* f, sqlite3_int64* size) {
  return R(f)->pMethods->xFileSize(R(f), size);
}
int Lock(sqlite3_file* f, int l) { return R(f)->pMethods->xLock(R(f), l); }
int Unlock(sqlite3_file* f, int l) { return R(f)->pMethods->xUnlock(R(f), l); }
int CheckReservedLock(sqlite3_file* f, int* out) {
  return R(f)->pMethods->xCheckReservedLock(R(f), out);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  return R(f)->pMethods->xFileControl(R(f), op, arg);
}
int SectorSize(sqlite3_file* f) { return R(f)->pMethods->xSectorSize(R(f)); }
int DeviceCharacteristics(sqlite3_file* f) {
  return R(f)->pMethods->xDeviceCharacteristics(R(f));
}
int ShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** p) {
  return R(f)->pMethods->xShmMap(R(f), region, size, extend, p);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return R(f)->pMethods->xShmLock(R(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { R(f)->pMethods->xShmBarrier(R(f)); }
int ShmUnmap(sqlite3_file* f, int del) { return R(f)->pMethods->xShmUnmap(R(f), del); }
int Fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** p) {
  return R(f)->pMethods->xFetch(R(f), off, n, p);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return R(f)->pMethods->xUnfetch(R(f), off, p);
}

const sqlite3_io_methods kMethods = {
    3,        Close,     Read,   Write,   Truncate, Sync,      FileSize,
    Lock,     Unlock,    CheckReservedLock, FileControl, SectorSize,
    DeviceCharacteristics, ShmMap, ShmLock, ShmBarrier, ShmUnmap, Fetch, Unfetch};

int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* f, int flags, int* out_flags) {
  auto* ff = reinterpret_cast<FaultFile*>(f);
  ff->real = reinterpret_cast<sqlite3_file*>(ff + 1);
  ff->base.pMethods = nullptr;
  const int rc = Real(vfs)->xOpen(Real(vfs), name, ff->real, flags, out_flags);
  if (rc == SQLITE_OK) ff->base.pMethods = &kMethods;
  return rc;
}
int Delete(sqlite3_vfs* vfs, const char* name, int sync) {
  return Real(vfs)->xDelete(Real(vfs), name, sync);
}
int Access(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
  return Real(vfs)->xAccess(Real(vfs), name, flags, out);
}
int FullPathname(sqlite3_vfs* vfs, const char* name, int n, char* out) {
  return Real(vfs)->xFullPathname(Real(vfs), name, n, out);
}
int Randomness(sqlite3_vfs* vfs, int n, char* out) {
  return Real(vfs)->xRandomness(Real(vfs), n, out);
}
int Sleep(sqlite3_vfs* vfs, int us) { return Real(vfs)->xSleep(Real(vfs), us); }
int CurrentTime(sqlite3_vfs* vfs, double* out) {
  return Real(vfs)->xCurrentTime(Real(vfs), out);
}
int GetLastError(sqlite3_vfs* vfs, int n, char* out) {
  return Real(vfs)->xGetLastError(Real(vfs), n, out);
}
int CurrentTimeInt64(sqlite3_vfs* vfs, sqlite3_int64* out) {
  return Real(vfs)->xCurrentTimeInt64(Real(vfs), out);
}

}  // namespace

void FaultVfs::Register() {
  static std::once_flag once;
  std::call_once(once, [] {
    static sqlite3_vfs vfs;
    sqlite3_vfs* real = sqlite3_vfs_find(nullptr);
    vfs = *real;  // dlopen and system-call hooks as the real one
    vfs.iVersion = 2;
    vfs.szOsFile = static_cast<int>(sizeof(FaultFile)) + real->szOsFile;
    vfs.zName = kName;
    vfs.pAppData = real;
    vfs.pNext = nullptr;
    vfs.xOpen = Open;
    vfs.xDelete = Delete;
    vfs.xAccess = Access;
    vfs.xFullPathname = FullPathname;
    vfs.xRandomness = Randomness;
    vfs.xSleep = Sleep;
    vfs.xCurrentTime = CurrentTime;
    vfs.xGetLastError = GetLastError;
    vfs.xCurrentTimeInt64 = CurrentTimeInt64;
    sqlite3_vfs_register(&vfs, 0);
  });
}

void FaultVfs::FailWritesAfter(int64_t n) { g_writes_left = n; }

void FaultVfs::FailSyncs() { g_fail_syncs = true; }

void FaultVfs::Heal() {
  g_writes_left = -1;
  g_failed = 0;
  g_fail_syncs = false;
}

int64_t FaultVfs::failed_writes() { return g_failed.load(); }

int64_t FaultVfs::syncs() { return g_syncs.load(); }

}  // namespace gpusched::store::testing
