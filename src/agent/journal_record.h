#pragma once
// The task journal's on-disk format, shared by gpusched-shim (which writes it) and the agent
// (which reads it, and rewrites the exit of a task it killed to carry the reason). Plain libc: no
// allocation, no exceptions, no iostream, so the shim that links it stays small and starts
// fast (the agent starts one per task).
//
// A journal directory (<data-dir>/journal) holds, per attempt of a task:
//   <id>.<attempt>.run   the shim's record, written before the task starts: which process
//                        supervises it and which process group the task leads
//   <id>.<attempt>.exit  how the task ended, kept until the server acknowledges it
// Each record is text, one "key=value" per line; readers ignore keys they do not know. The
// .run record appears atomically (temp file, rename). When the task ends the shim appends
// the exit's lines to it, fsyncs it and renames it to .exit (SealExit): the .exit record
// appears whole and durable, and no second file is created per task (file creation is the
// costly part of the journal). Exit lines end with "exit_end=1": a .run holding complete
// exit lines (a shim that died before its rename) still says how the task ended; torn ones
// are ignored.
//
// Thread-safety: every function is reentrant.

#include <sys/types.h>

#include <cstddef>

namespace gpusched::agent::journal {

inline constexpr const char* kRunSuffix = ".run";
inline constexpr const char* kExitSuffix = ".exit";
inline constexpr const char* kTempSuffix = ".tmp";

// Names one process unambiguously: a pid is reused, (boot, pid, start time) is not.
struct ProcessId {
  pid_t pid = 0;
  long long start_ticks = 0;  // field 22 of /proc/PID/stat: clock ticks after boot
  char boot_id[40] = {};      // /proc/sys/kernel/random/boot_id
};

struct RunRecord {
  ProcessId shim;             // the supervisor
  pid_t task_pgid = 0;        // the task leads its own process group (pgid == its pid)
  long long task_start_ticks = 0;
  long long started_ms = 0;   // Unix time
};

struct ExitRecord {
  int exit_code = 0;          // 128 + signal when killed by a signal, -1 when lost
  char reason[256] = {};      // "" for a plain exit; newlines become spaces
  long long finished_ms = 0;  // Unix time
  bool permanent = false;     // the task never ran, for a reason no retry fixes
};

// Writes "<id>.<attempt><suffix>" into `buf`. False when it does not fit.
bool RecordName(char* buf, size_t size, unsigned long long id, long long attempt,
                const char* suffix);
// Parses a record name; false unless it is "<id>.<attempt><suffix>" exactly.
bool ParseRecordName(const char* name, const char* suffix, unsigned long long* id,
                     long long* attempt);

// The record's text; returns its length, 0 when `size` is too small.
size_t FormatRun(const RunRecord& r, char* buf, size_t size);
size_t FormatExit(const ExitRecord& r, char* buf, size_t size);
// Parse a record's text (NUL-terminated). False when a required key is missing or bad, or,
// for an exit, its lines are not complete (no exit_end).
bool ParseRun(const char* text, RunRecord* out);
bool ParseExit(const char* text, ExitRecord* out);

// Replaces dir/name with `data` atomically: writes dir/name.tmp, fsyncs it when `sync`,
// renames it over dir/name. On failure returns false with "journal: cannot write
// dir/name: <errno text>" in `error` (truncated to `error_size`).
bool WriteRecordAtomic(const char* dir, const char* name, const char* data, size_t size,
                       bool sync, char* error, size_t error_size);
// Appends `data` (exit lines) to dir/run_name, fsyncs it and renames it to dir/exit_name.
// True once the lines are durable (a failed rename leaves them readable in the .run);
// false with the error in `error` as above.
bool SealExit(const char* dir, const char* run_name, const char* exit_name, const char* data,
              size_t size, char* error, size_t error_size);
// Reads dir/name into `buf` (NUL-terminated). Returns the length, or -1 with errno set
// (ENOENT: no such record; EFBIG: longer than `size` - 1).
long ReadRecord(const char* dir, const char* name, char* buf, size_t size);

// This boot's id. False when /proc is not mounted.
bool ReadBootId(char (&out)[40]);
// The identity of `pid` if it is alive; false when it is gone or a zombie.
bool ReadProcessId(pid_t pid, ProcessId* out);
bool SameProcess(const ProcessId& a, const ProcessId& b);

}  // namespace gpusched::agent::journal
