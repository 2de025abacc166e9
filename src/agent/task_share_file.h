#pragma once
// The share file of a task given GPUs (preload/share_file.h): the agent writes the task's
// GPU-memory share where the task cannot change it, and the spawn hands it to the task as an
// inherited read-only descriptor (preload::kShareFd), which the preload library trusts over
// the task's environment.

#include <string>

#include "base/status.h"

namespace gpusched::agent {

// Creates the share file at `path` holding `share_mib` (MiB per device, "4096,8192") and
// opens it read-only: a new file (one left by an earlier run is replaced), owned by the
// agent, mode 0400, never reached through a symbolic link. Returns the read-only descriptor
// (close-on-exec, numbered 10 or above so the spawn's dup2 onto 0-4 cannot clobber it).
StatusOr<int> CreateShareFile(const std::string& path, const std::string& share_mib);

}  // namespace gpusched::agent
