#include "agent/task_user.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace gpusched::agent {

StatusOr<TaskUser> LookUpTaskUser(const std::string& user, const std::string& node,
                                  bool allow_root) {
  std::vector<char> buf(16 * 1024);
  passwd pw{};
  passwd* found = nullptr;
  int err = 0;
  while ((err = getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found)) == ERANGE &&
         buf.size() < (1u << 20)) {
    buf.resize(buf.size() * 2);
  }
  if (found == nullptr) {
    if (err != 0 && err != ENOENT && err != ESRCH && err != EBADF && err != EPERM) {
      return Unavailable("user '" + user + "': cannot look it up on node " + node + ": " +
                         std::strerror(err));
    }
    return NotFound("user '" + user + "' does not exist on node " + node);
  }
  TaskUser u;
  u.name = user;
  u.uid = pw.pw_uid;
  u.gid = pw.pw_gid;
  u.home = pw.pw_dir != nullptr ? pw.pw_dir : "/";
  if (u.uid == 0 && !allow_root) {
    return FailedPrecondition("user '" + user + "' is uid 0 on node " + node +
                            ": tasks do not run as root unless the server sets "
                            "allow_root_tasks: true");
  }
  int n = 32;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  while (getgrouplist(user.c_str(), pw.pw_gid, groups.data(), &n) < 0) {
    if (n <= static_cast<int>(groups.size())) n = static_cast<int>(groups.size()) * 2;
    if (n > 65536) return Internal("user '" + user + "': too many groups");
    groups.resize(static_cast<size_t>(n));
  }
  u.groups.assign(groups.begin(), groups.begin() + n);
  return u;
}

bool CanRunTasksAsOtherUsers() { return geteuid() == 0; }

std::string DescribeOwnUser() {
  const uid_t uid = geteuid();
  std::vector<char> buf(16 * 1024);
  passwd pw{};
  passwd* found = nullptr;
  getpwuid_r(uid, &pw, buf.data(), buf.size(), &found);
  const std::string name = found != nullptr ? pw.pw_name : "?";
  return name + " (uid " + std::to_string(uid) + ")";
}

}  // namespace gpusched::agent
