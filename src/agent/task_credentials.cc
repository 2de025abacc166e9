#include "agent/task_credentials.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <unistd.h>

namespace gpusched::agent {
namespace {

// Parses an unsigned decimal id below 2^32 - 1 (-1 means "unchanged" to setuid and friends)
// at *p, advancing it; false when there is none or it does not fit.
bool ParseId(const char** p, unsigned int* out) {
  const char* s = *p;
  unsigned long long v = 0;
  int digits = 0;
  while (*s >= '0' && *s <= '9') {
    v = v * 10 + static_cast<unsigned>(*s - '0');
    if (++digits > 10 || v >= 0xffffffffULL) return false;
    ++s;
  }
  if (digits == 0) return false;
  *out = static_cast<unsigned int>(v);
  *p = s;
  return true;
}

}  // namespace

bool ParseTaskCredentials(const char* text, TaskCredentials* out) {
  if (text == nullptr) return false;
  const char* p = text;
  unsigned int uid = 0, gid = 0;
  if (!ParseId(&p, &uid) || *p++ != ':') return false;
  if (!ParseId(&p, &gid) || *p++ != ':') return false;
  size_t n = 0;
  while (*p != '\0') {
    unsigned int g = 0;
    if (n == kMaxTaskGroups || !ParseId(&p, &g)) return false;
    out->groups[n++] = static_cast<gid_t>(g);
    if (*p == ',') {
      ++p;
      if (*p == '\0') return false;  // a trailing comma
    } else if (*p != '\0') {
      return false;
    }
  }
  out->uid = static_cast<uid_t>(uid);
  out->gid = static_cast<gid_t>(gid);
  out->group_count = n;
  return true;
}

size_t FormatTaskCredentials(const TaskCredentials& c, char* buf, size_t size) {
  if (size == 0 || c.group_count > kMaxTaskGroups) return 0;
  int len = snprintf(buf, size, "%u:%u:", static_cast<unsigned>(c.uid),
                     static_cast<unsigned>(c.gid));
  if (len < 0 || static_cast<size_t>(len) >= size) return 0;
  size_t used = static_cast<size_t>(len);
  for (size_t i = 0; i < c.group_count; ++i) {
    len = snprintf(buf + used, size - used, "%s%u", i == 0 ? "" : ",",
                   static_cast<unsigned>(c.groups[i]));
    if (len < 0 || static_cast<size_t>(len) >= size - used) return 0;
    used += static_cast<size_t>(len);
  }
  return used;
}

int DropToCredentials(const TaskCredentials& c, const char** step) {
  if (setgroups(c.group_count, c.groups) != 0) {
    *step = "setgroups";
    return errno;
  }
  if (setgid(c.gid) != 0) {
    *step = "setgid";
    return errno;
  }
  if (setuid(c.uid) != 0) {
    *step = "setuid";
    return errno;
  }
  // Verified whatever the target, uid 0 included: every id is the one asked for, and a uid
  // that could be regained would mean the drop did not happen.
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (getresuid(&ruid, &euid, &suid) != 0 || getresgid(&rgid, &egid, &sgid) != 0 ||
      ruid != c.uid || euid != c.uid || suid != c.uid || rgid != c.gid || egid != c.gid ||
      sgid != c.gid) {
    *step = "setuid (the ids are not the task's)";
    return EPERM;
  }
  if (c.uid != 0 && setuid(0) == 0) {
    *step = "setuid (privileges still held)";
    return EPERM;
  }
  return 0;
}

}  // namespace gpusched::agent
