#include "agent/rank_launcher.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace gpusched::agent {
namespace {

long EnvNumber(const char* name, long fallback) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long v = strtol(text, &end, 10);
  return *end == '\0' && v >= 0 ? v : fallback;
}

long long MonotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

int CodeOf(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace

bool RankDevices(const char* visible, int index, int copies, char* out, unsigned long size) {
  if (copies < 1 || index < 0 || index >= copies || size == 0) return false;
  int count = 0;
  if (*visible != '\0') {
    count = 1;
    for (const char* p = visible; *p != '\0'; ++p) count += *p == ',';
  }
  if (count % copies != 0) return false;
  const int per = count / copies, first = index * per;
  unsigned long used = 0;
  out[0] = '\0';
  const char* p = visible;
  for (int item = 0; item < count; ++item) {
    const char* comma = strchr(p, ',');
    const unsigned long len = comma != nullptr ? static_cast<unsigned long>(comma - p) : strlen(p);
    if (item >= first && item < first + per) {
      if (used + len + 2 > size) return false;
      if (used > 0) out[used++] = ',';
      memcpy(out + used, p, len);
      used += len;
      out[used] = '\0';
    }
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return true;
}

namespace {

// The copies started so far and how their ends are awaited.
struct Ranks {
  pid_t pids[kMaxTasksPerNode];
  int started = 0;
  long grace_ms = 0;
  long long kill_at = -1;  // when the copies still running get SIGKILL; -1 = not stopping

  void Signal(int sig) {
    for (int i = 0; i < started; ++i) {
      if (pids[i] > 0) kill(pids[i], sig);
    }
  }
  void Stop() {
    Signal(SIGTERM);
    kill_at = MonotonicMs() + grace_ms;
  }
};

// The forked copy `index`: its torchrun-style rank variables and its share of the GPUs, then
// the program.
[[noreturn]] void ExecCopy(int index, int copies, long node_rank, long nnodes,
                           const char* devices, const char* program, char* const* argv) {
  signal(SIGTERM, SIG_DFL);
  char number[32];
  snprintf(number, sizeof number, "%d", index);
  setenv("LOCAL_RANK", number, 1);
  snprintf(number, sizeof number, "%ld", node_rank * copies + index);
  setenv("RANK", number, 1);
  snprintf(number, sizeof number, "%d", copies);
  setenv("LOCAL_WORLD_SIZE", number, 1);
  snprintf(number, sizeof number, "%ld", nnodes * copies);
  setenv("WORLD_SIZE", number, 1);
  if (devices != nullptr) setenv("CUDA_VISIBLE_DEVICES", devices, 1);
  unsetenv(kTasksPerNodeEnv);
  unsetenv("GPUSCHED_RANK_GRACE_MS");
  execv(program, argv);
  dprintf(2, "gpusched: cannot exec %s: %s\n", program, strerror(errno));
  _exit(127);
}

// Waits for every copy; the first that fails stops the others (SIGTERM, SIGKILL after the
// grace). Returns 0, or the first failure's code, or `result` when already failed.
int AwaitRanks(Ranks& ranks, int result) {
  int running = ranks.started;
  while (running > 0) {
    int status = 0;
    const pid_t done = waitpid(-1, &status, ranks.kill_at < 0 ? 0 : WNOHANG);
    if (done < 0) {
      if (errno == EINTR) continue;
      break;  // no children left
    }
    if (done == 0) {  // stopping the others: wait, then kill what is left
      if (MonotonicMs() >= ranks.kill_at) {
        ranks.Signal(SIGKILL);
        ranks.kill_at = MonotonicMs() + 1'000'000;
      }
      const timespec nap{0, 20'000'000};
      nanosleep(&nap, nullptr);
      continue;
    }
    for (int i = 0; i < ranks.started; ++i) {
      if (ranks.pids[i] == done) ranks.pids[i] = -1;
    }
    --running;
    const int code = CodeOf(status);
    if (code != 0 && result == 0) {
      result = code;  // the first failure ends the node's ranks
      dprintf(2, "gpusched: a process of this node exited with code %d; stopping the others\n",
              code);
      ranks.Stop();
    }
  }
  return result;
}

}  // namespace

int RunRanks(int copies, const char* program, char* const* argv) {
  const long node_rank = EnvNumber("NODE_RANK", 0);
  const long nnodes = EnvNumber("NNODES", 1);
  const char* visible_env = getenv("CUDA_VISIBLE_DEVICES");
  char visible[512] = "";
  if (visible_env != nullptr) snprintf(visible, sizeof visible, "%s", visible_env);
  char devices[kMaxTasksPerNode][512];
  for (int i = 0; i < copies; ++i) {
    if (!RankDevices(visible, i, copies, devices[i], sizeof devices[i])) {
      dprintf(2, "gpusched: cannot split CUDA_VISIBLE_DEVICES=%s evenly over %d processes\n",
              visible, copies);
      return 127;
    }
  }
  signal(SIGTERM, SIG_IGN);  // the copies get the group's SIGTERM; the launcher waits
  Ranks ranks;
  ranks.grace_ms = EnvNumber("GPUSCHED_RANK_GRACE_MS", 5000);
  for (; ranks.started < copies; ++ranks.started) {
    const pid_t pid = fork();
    if (pid < 0) {
      dprintf(2, "gpusched: cannot start process %d of %d: %s\n", ranks.started, copies,
              strerror(errno));
      break;
    }
    if (pid == 0) {
      ExecCopy(ranks.started, copies, node_rank, nnodes,
               visible_env != nullptr ? devices[ranks.started] : nullptr, program, argv);
    }
    ranks.pids[ranks.started] = pid;
  }
  const int result = ranks.started < copies ? 127 : 0;
  if (result != 0) ranks.Stop();
  return AwaitRanks(ranks, result);
}

}  // namespace gpusched::agent
