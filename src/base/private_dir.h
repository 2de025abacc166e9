#pragma once
// Data directories that no other local user can plant files in (issues 35 and 36): the
// server's (state.db, admin-token) and each agent's (task logs, the journal). Only this
// process's user may own them and nobody else may write to them; otherwise a planted
// symlink or file there steers what the daemon writes, reads or hands out.

#include <string>
#include <string_view>

#include "base/status.h"

namespace gpusched {

// Makes `path` a directory only this process's user controls: missing directories are
// created (the last one 0700, parents 0755 as root else 0700), and the directory must then be
// a real directory (not a symlink), owned by this process's effective user and writable by
// neither group nor others. FailedPrecondition otherwise, naming `field`, the path, its owner
// and mode, and what to do.
Status EnsurePrivateDir(const std::string& path, std::string_view field);

// The default data directory named `name` ("server", "agent-NODE"): /var/lib/gpusched/NAME
// as root, else $XDG_STATE_HOME/gpusched/NAME ($XDG_STATE_HOME: ~/.local/state when unset or
// not absolute). Never under /tmp: a name there can be taken first by anyone.
std::string DefaultStateDir(std::string_view name);

}  // namespace gpusched
