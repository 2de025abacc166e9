#pragma once
// The Unix identity a task runs as, handed from the agent (which looks the user up: getpwnam,
// getgrouplist) to gpusched-shim (which drops to it in the task's child, between fork and
// exec, with system calls only) on the shim's argv, never in an environment (issue 35):
//
//     --creds=UID:GID:G1,G2,...     e.g. "1001:1001:1001,27"  (the group list may be empty)
//
// Plain libc, no allocation, like journal_record.h: the shim links it.
//
// Thread-safety: every function is reentrant.

#include <sys/types.h>

#include <cstddef>

namespace gpusched::agent {

inline constexpr size_t kMaxTaskGroups = 256;

struct TaskCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
  size_t group_count = 0;
  gid_t groups[kMaxTaskGroups] = {};
};

// Parses "UID:GID:G1,G2,...". False on anything else: a missing field, a number that does not
// fit, more than kMaxTaskGroups groups, trailing text.
bool ParseTaskCredentials(const char* text, TaskCredentials* out);
// Writes `c` in that format into buf (NUL-terminated); returns its length, 0 if it does not fit.
size_t FormatTaskCredentials(const TaskCredentials& c, char* buf, size_t size);
// In the task's child, before exec: supplementary groups, then gid, then uid (the order that
// keeps the right to change each), then a check that every real, effective and saved id is
// the one asked for (uid 0 too: root only when the agent chose it) and, for any other uid,
// that root cannot be regained. Returns 0, or the errno of the step that failed with *step
// naming it. Only system calls: safe between fork and exec.
int DropToCredentials(const TaskCredentials& c, const char** step);

}  // namespace gpusched::agent
