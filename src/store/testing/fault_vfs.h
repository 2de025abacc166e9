#pragma once
// FaultVfs: a SQLite VFS that forwards to the default one and fails writes on command, so
// tests make the store's real write paths fail (a statement, a COMMIT) the way LevelDB's
// tests use a fault-injecting Env. Open a SqliteStore with Options::vfs = FaultVfs::kName.
//
// Thread-safety: the controls are atomics, safe from any thread. Process-wide: one test at a
// time arms it (gtest runs the tests of a binary sequentially).

#include <cstdint>

namespace gpusched::store::testing {

class FaultVfs {
 public:
  static constexpr const char* kName = "gpusched-fault";
  // Registers the VFS (idempotent; not the default one).
  static void Register();
  // Writes to database and WAL files succeed `n` more times, then fail with SQLITE_IOERR
  // until Heal(). n = 0 fails the very next write.
  static void FailWritesAfter(int64_t n);
  // Syncs (fsync of a database or WAL file) fail with SQLITE_IOERR_FSYNC until Heal().
  static void FailSyncs();
  static void Heal();  // (also ends FailSyncs)
  // Writes that failed since the last Heal.
  static int64_t failed_writes();
  // Syncs asked of the files opened through this VFS since the process started.
  static int64_t syncs();
};

}  // namespace gpusched::store::testing
