// The ranks of one node: with GPUSCHED_TASKS_PER_NODE=K > 1 (submit --tasks-per-node K) the
// task's process is this launcher, which starts K copies of the command, as torchrun's
// --nproc-per-node does, and stands for them towards gpusched-shim. Copy i gets
//
//     LOCAL_RANK=i  RANK=NODE_RANK*K+i  LOCAL_WORLD_SIZE=K  WORLD_SIZE=NNODES*K
//     CUDA_VISIBLE_DEVICES = its share: the i-th of K equal slices of the node's list
//
// and the launcher ends with the first copy that fails (its exit code, or 128 + its signal):
// the others get SIGTERM, then SIGKILL after GPUSCHED_RANK_GRACE_MS (default 5 s). All exit
// 0: exit 0. A SIGTERM to the task's process group (a kill from the agent) reaches every
// copy directly; the launcher ignores it and waits for them.
//
// libc only and no allocation, like the shim it runs in.

#pragma once

namespace gpusched::agent {

inline constexpr const char* kTasksPerNodeEnv = "GPUSCHED_TASKS_PER_NODE";
inline constexpr int kMaxTasksPerNode = 64;

// The slice of `visible` ("0,1,2,3") for copy `index` of `copies`, into `out`. False when the
// list does not split evenly (or does not fit `out`).
bool RankDevices(const char* visible, int index, int copies, char* out, unsigned long size);

// Runs `copies` copies of `program` `argv` as above and returns the launcher's exit code.
// REQUIRES: 2 <= copies <= kMaxTasksPerNode.
int RunRanks(int copies, const char* program, char* const* argv);

}  // namespace gpusched::agent
