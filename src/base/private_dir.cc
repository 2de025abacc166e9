#include "base/private_dir.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpusched {
namespace {

std::string OwnerName(uid_t uid) {
  passwd pw{};
  passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
    return std::string(found->pw_name) + " (uid " + std::to_string(uid) + ")";
  }
  return "uid " + std::to_string(uid);
}

std::string Mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// Creates each missing directory of `path`: the last with mode 0700, the others `parents`.
Status CreateMissing(const std::string& path, mode_t parents, std::string_view field) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string part = path.substr(0, pos);
    const bool last = pos == path.size();
    if (mkdir(part.c_str(), last ? 0700 : parents) != 0 && errno != EEXIST) {
      return FailedPrecondition(std::string(field) + ": cannot create " + part + ": " +
                                std::strerror(errno));
    }
  }
  return Status::Ok();
}

}  // namespace

Status EnsurePrivateDir(const std::string& path, std::string_view field) {
  if (path.empty()) return InvalidArgument(std::string(field) + ": empty path");
  std::string clean = path;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  GS_RETURN_IF_ERROR(CreateMissing(clean, geteuid() == 0 ? 0755 : 0700, field));
  struct stat st {};
  if (lstat(clean.c_str(), &st) != 0) {
    return FailedPrecondition(std::string(field) + ": cannot read " + clean + ": " +
                              std::strerror(errno));
  }
  const std::string what = std::string(field) + ": " + clean;
  if (S_ISLNK(st.st_mode)) {
    return FailedPrecondition(what + " is a symbolic link (owner " + OwnerName(st.st_uid) +
                              "); give a real directory that only this user owns");
  }
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition(what + " is not a directory");
  if (st.st_uid != geteuid()) {
    return FailedPrecondition(what + " is owned by " + OwnerName(st.st_uid) + ", not by " +
                              OwnerName(geteuid()) + " who runs this; anything planted in "
                              "it would be trusted. Use a directory of your own (remove this "
                              "one, or give another --data-dir)");
  }
  if ((st.st_mode & 022) != 0) {
    return FailedPrecondition(what + " (owner " + OwnerName(st.st_uid) + ", mode " +
                              Mode(st.st_mode) + ") is writable by " +
                              ((st.st_mode & 002) != 0 ? "every user" : "its group") +
                              "; run chmod 700 " + clean + " or give another --data-dir");
  }
  return Status::Ok();
}

std::string DefaultStateDir(std::string_view name) {
  if (geteuid() == 0) return "/var/lib/gpusched/" + std::string(name);
  const char* xdg = std::getenv("XDG_STATE_HOME");
  std::string base;
  if (xdg != nullptr && xdg[0] == '/') {
    base = xdg;
  } else {
    const char* home = std::getenv("HOME");
    if (home == nullptr || home[0] != '/') {
      const passwd* pw = getpwuid(geteuid());
      home = pw != nullptr ? pw->pw_dir : "/";
    }
    base = std::string(home) + "/.local/state";
  }
  return base + "/gpusched/" + std::string(name);
}

}  // namespace gpusched
