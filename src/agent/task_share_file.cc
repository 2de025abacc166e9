#include "agent/task_share_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "preload/share_file.h"

namespace gpusched::agent {

StatusOr<int> CreateShareFile(const std::string& path, const std::string& share_mib) {
  auto fail = [&](const char* what) {
    return Internal("share file: cannot " + std::string(what) + " " + path + ": " +
                    std::strerror(errno));
  };
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return fail("replace");
  const int out = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
  if (out < 0) return fail("create");
  const std::string text = std::string(preload::kShareFileMagic) + share_mib + "\n";
  const bool written = write(out, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       fchmod(out, 0400) == 0;  // whatever the umask
  const int write_errno = errno;
  close(out);
  if (!written) {
    errno = write_errno;
    return fail("write");
  }
  const int in = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return fail("open");
  const int high = fcntl(in, F_DUPFD_CLOEXEC, 10);
  const int dup_errno = errno;
  close(in);
  if (high < 0) {
    errno = dup_errno;
    return fail("duplicate the descriptor of");
  }
  return high;
}

}  // namespace gpusched::agent
