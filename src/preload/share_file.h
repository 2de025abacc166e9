#pragma once
// The share file: how the agent tells the preload library a task's GPU-memory share in a way
// the task cannot change. The agent writes it (owned by the agent, mode 0400: no task can
// open another task's, which may hold a larger share) and hands it to the task as an
// inherited descriptor, kShareFd, open read-only; the library reads it when it loads. Its text is kShareFileMagic followed by the share in MiB per visible
// device in CUDA ordinal order ("4096" or "4096,8192") and a newline.
//
// The library trusts the descriptor only when it is a regular file starting with the magic,
// with no write permission bits, owned by root or by a user other than the process's
// effective user (a file the task owns it could rewrite). See README.md.

namespace gpusched::preload {

inline constexpr int kShareFd = 4;
inline constexpr char kShareFileMagic[] = "gpusched-share 1\n";

}  // namespace gpusched::preload
