// gpusched-shim: the supervisor of one task, like containerd's shim or Slurm's slurmstepd.
// The agent (ProcessRunner) starts one per task as
//
//     gpusched-shim [OPTION...] JOURNAL_DIR ID ATTEMPT PROGRAM ARGV0 [ARG...]
//
// with the task's environment as its own, stdin on /dev/null, stdout and stderr on the
// task's log, fd 3 its end of the agent's status socket (or pipe), and SIGTERM, SIGINT, SIGHUP,
// SIGQUIT, SIGUSR1, SIGCHLD and the job-control stops blocked (so none is lost, and nothing
// stops it, before it waits for them).
//
// The trust boundary (issue 35): the environment is the task's, data only; nothing the shim
// decides comes from it. What it applies comes from the agent on its argv, as leading
// options (ParseOptions, one table entry each):
//     --creds=UID:GID:G1,G2      the task's identity (task_credentials.h); absent: the shim's
//     --workdir=DIR              the task's working directory; absent: the shim's
//     --cpus=0-7,16-23           the CPUs the task is pinned to
//     --ld-preload=LIBS          the task's LD_PRELOAD (never loaded into the shim itself)
//     --tasks-per-node=K         K > 1: the task's process starts K copies (rank_launcher.h)
//     --stop-signal=N            what a stop sends the task's group instead of SIGTERM
//                                (the task's --signal, issue 37; core/stop_signal.h)
//     --confirm=1                after the run record, ask the agent on fd 3 and run the
//                                task only on its answer (shim_confirm.h); else the record
//                                is removed and the task never runs
//     --log-max-size=BYTES       the most of the task's output its log keeps (issue 39; the
//                                agent's log_max_size): see "Output" below
//
// The shim is not tied to the agent's life: its first act is to lead a session of its own
// (away from the agent's process group and terminal), it has no parent-death signal, and it
// outlives an agent restart; the next agent adopts it through the journal. (Under systemd,
// the agent's unit needs KillMode=process, or stopping the agent kills its whole cgroup.)
//  1. It forks the task into a process group of its own and, before the task execs, writes
//     JOURNAL_DIR/ID.ATTEMPT.run (its own identity, the task's group).
//  2. SIGTERM is forwarded to the task's group (as --stop-signal when given), followed by SIGCONT (a stopped task would
//     not act on it); SIGUSR1 becomes SIGKILL of the group (a SIGKILL sent to the shim
//     itself would kill the shim, not the task).
//  3. When the task exits it kills what is left of the group, seals the record as
//     ID.ATTEMPT.exit (exit lines appended, fsynced, renamed: it stays until the server has
//     it), and exits with the task's exit code.
// The task's child drops privileges first: with --creds it switches to that uid, gid and
// supplementary groups (a drop that fails fails the task, never runs it as root), then
// enters --workdir, finds PROGRAM (on the task's PATH when it holds no '/') and execs it,
// so every error the task's user sees is one that user could have found alone. Such an
// error ("workdir: DIR: Permission denied", "command: NAME: not found on PATH") goes to the
// task's log and becomes the exit's reason ("launch failed: ..."), permanent in the journal
// (no retry fixes it). The shim itself stays root, to journal and to signal the task's group.
// What it cannot journal (the .run or .exit record cannot be written, fork fails) it writes
// as one line to fd 3 and to the log, so the agent that started it can report it.
//
// Output (issue 39). Without --log-max-size the task writes its log itself (stdout and
// stderr are the log's descriptor). With it, the task's stdout and stderr are the write end
// of a pipe and a thread of the shim (PumpOutput) copies what comes to the log until the log
// holds BYTES, then appends one note ("gpusched: output truncated after BYTES bytes") and
// reads on, dropping the rest: the task keeps running and writing (it never blocks on a
// full pipe, and no SIGXFSZ), whatever processes it forks (they inherit the pipe), and the
// cap comes from the agent's argv, never from the task. When the task's leader has exited,
// the pump drains what is left for at most a second (a process that left the task's group
// may hold the pipe open) before the exit is sealed.
//
// Every task's start goes through this program, so it is kept lean: libc only (no
// iostream, no allocation), one fork, one thread for the output, a handful of system calls.

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "agent/journal_record.h"
#include "agent/rank_launcher.h"
#include "agent/shim_confirm.h"
#include "agent/task_credentials.h"

namespace {

namespace journal = gpusched::agent::journal;

constexpr int kStatusFd = 3;

// What the agent passed on the argv (ParseOptions); nullptr = not given.
struct ShimOptions {
  const char* creds = nullptr;
  const char* workdir = nullptr;
  const char* cpus = nullptr;
  const char* ld_preload = nullptr;
  const char* tasks_per_node = nullptr;
  const char* stop_signal = nullptr;
  const char* log_max_size = nullptr;
  const char* confirm = nullptr;
};

// Parsed before the fork; read by the task's child.
ShimOptions g_options;
gpusched::agent::TaskCredentials g_creds;  // the task's identity when it is not the shim's
bool g_drop = false;
int g_copies = 1;  // --tasks-per-node
int g_stop_signal = SIGTERM;  // --stop-signal
long long g_log_max = -1;     // --log-max-size; -1: the task writes its log itself
int g_output_pipe[2] = {-1, -1};  // with --log-max-size: the task's stdout and stderr
std::atomic<bool> g_task_done{false};  // the leader has exited: the pump drains and ends
bool g_confirm = false;  // --confirm=1: the agent answers on fd 3 before the task runs

// Reads the leading --key=value options of argv into *out (a later one wins); "--" ends
// them. Returns the index of the first operand (JOURNAL_DIR), or -1 with *bad naming an
// option that is not in the table. A new option is one more entry.
int ParseOptions(int argc, char** argv, ShimOptions* out, const char** bad) {
  struct Option {
    const char* prefix;
    const char** value;
  };
  const Option kOptions[] = {
      {"--creds=", &out->creds},
      {"--workdir=", &out->workdir},
      {"--cpus=", &out->cpus},
      {"--ld-preload=", &out->ld_preload},
      {"--tasks-per-node=", &out->tasks_per_node},
      {"--stop-signal=", &out->stop_signal},
      {"--log-max-size=", &out->log_max_size},
      {"--confirm=", &out->confirm},
  };
  int i = 1;
  for (; i < argc && strncmp(argv[i], "--", 2) == 0; ++i) {
    if (strcmp(argv[i], "--") == 0) return i + 1;
    const Option* match = nullptr;
    for (const Option& o : kOptions) {
      if (strncmp(argv[i], o.prefix, strlen(o.prefix)) == 0) match = &o;
    }
    if (match == nullptr) {
      *bad = argv[i];
      return -1;
    }
    *match->value = argv[i] + strlen(match->prefix);
  }
  return i;
}

// One line for the agent that started this shim, and for the task's log.
void Report(const char* message) {
  (void)!write(kStatusFd, message, strlen(message));
  dprintf(2, "gpusched-shim: %s\n", message);
}

long long NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// Pins the calling process to "0-7,16-23" (the CPUs of the task's GPUs' NUMA node, from the
// agent). A list that does not parse, or an affinity the kernel refuses, leaves it unpinned.
void PinToCpus(const char* list) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const char* p = list;
  while (*p != '\0') {
    char* end = nullptr;
    const long first = strtol(p, &end, 10);
    if (end == p || first < 0 || first >= CPU_SETSIZE) return;
    long last = first;
    p = end;
    if (*p == '-') {
      last = strtol(p + 1, &end, 10);
      if (end == p + 1 || last < first || last >= CPU_SETSIZE) return;
      p = end;
    }
    for (long c = first; c <= last; ++c) CPU_SET(static_cast<int>(c), &set);
    if (*p == ',') ++p;
    else if (*p != '\0' && *p != '\n') return;
    else break;
  }
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    dprintf(2, "gpusched-shim: cannot pin the task to CPUs %s: %s\n", list, strerror(errno));
  }
}

// The task's child could not start the task: says why in the task's log and to the shim
// (on `why_fd`: 'P' for a reason no retry fixes, else 'R', then the text), and exits 127.
[[noreturn]] __attribute__((format(printf, 3, 4))) void FailStart(int why_fd, bool permanent,
                                                                  const char* format, ...) {
  char text[512];
  text[0] = permanent ? 'P' : 'R';
  va_list args;
  va_start(args, format);
  vsnprintf(text + 1, sizeof text - 1, format, args);
  va_end(args);
  (void)!write(why_fd, text, strlen(text));
  dprintf(2, "gpusched-shim: %s\n", text + 1);
  _exit(127);
}

// The program to exec, as the task's user finds it: PROGRAM itself when it holds a '/'
// (relative to the working directory), else the first executable regular file of that name
// on the task's PATH (a directory the user cannot search holds nothing for it). Returns
// false with *err set (ENOENT: not on PATH).
bool FindProgram(const char* program, char* out, size_t size, int* err) {
  if (strchr(program, '/') != nullptr) {
    if (access(program, X_OK) != 0) {
      *err = errno;
      return false;
    }
    const int n = snprintf(out, size, "%s", program);
    if (n < 0 || static_cast<size_t>(n) >= size) {
      *err = ENAMETOOLONG;
      return false;
    }
    return true;
  }
  const char* path = getenv("PATH");
  if (path == nullptr) path = "/usr/local/bin:/usr/bin:/bin";
  for (const char* p = path;;) {
    const char* end = strchrnul(p, ':');
    const int dir_len = static_cast<int>(end - p);
    const int n = snprintf(out, size, "%.*s/%s", dir_len == 0 ? 1 : dir_len,
                           dir_len == 0 ? "." : p, program);
    struct stat st;
    if (n > 0 && static_cast<size_t>(n) < size && stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
        access(out, X_OK) == 0) {
      return true;
    }
    if (*end == '\0') break;
    p = end + 1;
  }
  *err = ENOENT;
  return false;
}

// The forked child: leads its own group, waits until the shim has recorded it (EOF on the
// gate means the shim could not, and the task must not run), drops to the task's user, and
// only then enters the working directory, finds the program and execs it.
[[noreturn]] void ExecTask(int gate, int why_fd, const char* program, char** argv) {
  setpgid(0, 0);
  if (g_output_pipe[1] >= 0) {  // the pump's pipe (dup2 clears close-on-exec on 1 and 2)
    dup2(g_output_pipe[1], STDOUT_FILENO);
    dup2(g_output_pipe[1], STDERR_FILENO);
  }
  char go = 0;
  ssize_t n;
  do {
    n = read(gate, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(127);
  if (g_drop) {
    const char* step = "";
    if (const int err = gpusched::agent::DropToCredentials(g_creds, &step); err != 0) {
      FailStart(why_fd, false, "cannot run the task as uid %u gid %u: %s: %s",
                static_cast<unsigned>(g_creds.uid), static_cast<unsigned>(g_creds.gid), step,
                strerror(err));
    }
  }
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (g_options.workdir != nullptr && chdir(g_options.workdir) != 0) {
    FailStart(why_fd, true, "workdir: %s: %s", g_options.workdir, strerror(errno));
  }
  char resolved[PATH_MAX];
  if (int err = 0; !FindProgram(program, resolved, sizeof resolved, &err)) {
    if (err == ENOENT && strchr(program, '/') == nullptr) {
      FailStart(why_fd, true, "command: %s: not found on PATH", program);
    }
    FailStart(why_fd, true, "command: %s: %s", program, strerror(err));
  }
  if (g_options.cpus != nullptr) PinToCpus(g_options.cpus);
  // The preload reaches the shim as an option (a preload must not load into the shim
  // itself: under ASan it would come before the sanitizer runtime) and becomes LD_PRELOAD
  // for the task only.
  if (g_options.ld_preload != nullptr) setenv("LD_PRELOAD", g_options.ld_preload, 1);
  // --tasks-per-node K: this process leads the task's group and starts the K copies.
  if (g_copies >= 2) {
    close(why_fd);  // the copies' own exec failures are theirs to log
    _exit(gpusched::agent::RunRanks(g_copies, resolved, argv));
  }
  execv(resolved, argv);
  FailStart(why_fd, errno == ENOENT || errno == EACCES || errno == ENOEXEC, "command: %s: %s",
            resolved, strerror(errno));
}

long long MonoMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// Writes all of `data` to the log (stdout); a write that fails (a full disk) drops the rest.
void WriteLog(const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(STDOUT_FILENO, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// The log's budget: what it may still take before the note (its size now counts: the shim
// appends), and whether the note was written.
struct OutputBudget {
  long long left = 0;
  bool noted = false;
  char last = '\n';  // the last byte written, so the note starts a line of its own
};

// Copies `data` to the log within the budget; the first byte beyond it writes the note.
void Emit(OutputBudget& b, const char* data, size_t size) {
  const size_t keep = static_cast<size_t>(b.left) < size ? static_cast<size_t>(b.left) : size;
  if (keep > 0) {
    WriteLog(data, keep);
    b.left -= static_cast<long long>(keep);
    b.last = data[keep - 1];
  }
  if (keep == size || b.noted) return;
  char note[96];
  const int n = snprintf(note, sizeof note, "%sgpusched: output truncated after %lld bytes\n",
                         b.last == '\n' ? "" : "\n", g_log_max);
  if (n > 0) WriteLog(note, static_cast<size_t>(n));
  b.noted = true;
}

// The output thread (see "Output" above): from the pipe to the log until every writer has
// closed it, or, once the leader has exited, until it is quiet for 100 ms or a second has
// passed.
void* PumpOutput(void*) {
  static char buf[64 * 1024];
  OutputBudget budget;
  struct stat st;
  const long long size = fstat(STDOUT_FILENO, &st) == 0 ? static_cast<long long>(st.st_size) : 0;
  budget.left = g_log_max > size ? g_log_max - size : 0;
  long long drain_until = -1;
  for (;;) {
    if (g_task_done.load() && drain_until < 0) drain_until = MonoMs() + 1000;
    pollfd p{g_output_pipe[0], POLLIN, 0};
    const int ready = poll(&p, 1, drain_until < 0 ? 200 : 100);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      if (drain_until >= 0) break;
      continue;
    }
    const ssize_t n = read(g_output_pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // every writer closed it
    Emit(budget, buf, static_cast<size_t>(n));
    if (drain_until >= 0 && MonoMs() > drain_until) break;
  }
  return nullptr;
}

// Forwards kill requests until the task leader exits; returns its wait status.
int Supervise(pid_t task, const sigset_t& waited) {
  for (;;) {
    siginfo_t info;
    const int sig = sigwaitinfo(&waited, &info);
    if (sig == SIGTERM) {
      kill(-task, g_stop_signal);
      kill(-task, SIGCONT);  // a stopped (hung) task gets to handle it, as systemd does
    } else if (sig == SIGUSR1) {
      kill(-task, SIGKILL);
    } else if (sig == SIGCHLD) {
      siginfo_t w;
      memset(&w, 0, sizeof w);
      if (waitid(P_PID, static_cast<id_t>(task), &w, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          w.si_pid == task) {
        break;
      }
    }
    // SIGINT, SIGHUP, SIGQUIT: ignored; only the agent decides the task's end.
  }
  // The leader has exited but is not reaped yet, so its pid, and with it the group id,
  // cannot have been reused: this reaches exactly what is left of the task's group.
  kill(-task, SIGKILL);
  int status = 0;
  while (waitpid(task, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// How the task ended: its wait status, and what its child said if it could not start it.
journal::ExitRecord ExitOf(int status, int why_fd) {
  journal::ExitRecord r;
  if (WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
    snprintf(r.reason, sizeof r.reason, "killed by signal %d", WTERMSIG(status));
  } else {
    r.exit_code = WEXITSTATUS(status);
  }
  char why[512];
  const ssize_t n = read(why_fd, why, sizeof why - 1);  // non-blocking: nothing if it ran
  if (n > 1) {
    why[n] = '\0';
    r.permanent = why[0] == 'P';
    snprintf(r.reason, sizeof r.reason, "launch failed: %.*s",
             static_cast<int>(sizeof r.reason) - 16, why + 1);  // cut to fit
  }
  r.finished_ms = NowMs();
  return r;
}

bool ParseKey(const char* id_text, const char* attempt_text, unsigned long long* id,
              long long* attempt) {
  char* end = nullptr;
  errno = 0;
  *id = strtoull(id_text, &end, 10);
  if (errno != 0 || *end != '\0' || end == id_text) return false;
  *attempt = strtoll(attempt_text, &end, 10);
  return errno == 0 && *end == '\0' && end != attempt_text && *attempt >= 0;
}


constexpr char kUsage[] =
    "usage: gpusched-shim [--creds=UID:GID:GROUPS] [--workdir=DIR] [--cpus=LIST] "
    "[--ld-preload=LIBS] [--tasks-per-node=K] [--stop-signal=N] [--log-max-size=BYTES] "
    "[--confirm=1] "
    "JOURNAL_DIR ID ATTEMPT PROGRAM ARGV0 [ARG...]\n"
    "(started by the gpusched agent, one per task)\n";

// Checks the options that need parsing; false after reporting the first that does not.
bool ApplyOptions() {
  if (g_options.creds != nullptr) {
    if (!gpusched::agent::ParseTaskCredentials(g_options.creds, &g_creds)) {
      Report("launch failed: --creds: the task's credentials do not parse");
      return false;
    }
    g_drop = true;
  }
  if (const char* k = g_options.tasks_per_node) {
    char* end = nullptr;
    const long copies = strtol(k, &end, 10);
    if (end == k || *end != '\0' || copies < 1 || copies > gpusched::agent::kMaxTasksPerNode) {
      char msg[160];
      snprintf(msg, sizeof msg, "launch failed: --tasks-per-node=%.40s: must be 1 to %d", k,
               gpusched::agent::kMaxTasksPerNode);
      Report(msg);
      return false;
    }
    g_copies = static_cast<int>(copies);
  }
  if (const char* m = g_options.log_max_size) {
    char* end = nullptr;
    errno = 0;
    const long long bytes = strtoll(m, &end, 10);
    if (end == m || *end != '\0' || errno != 0 || bytes < 1) {
      char msg[160];
      snprintf(msg, sizeof msg, "launch failed: --log-max-size=%.40s: not a size in bytes", m);
      Report(msg);
      return false;
    }
    g_log_max = bytes;
  }
  if (const char* n = g_options.stop_signal) {
    char* end = nullptr;
    const long sig = strtol(n, &end, 10);
    if (end == n || *end != '\0' || sig < 1 || sig > SIGRTMAX || sig == SIGKILL ||
        sig == SIGSTOP) {
      char msg[160];
      snprintf(msg, sizeof msg, "launch failed: --stop-signal=%.40s: not a signal to stop with",
               n);
      Report(msg);
      return false;
    }
    g_stop_signal = static_cast<int>(sig);
  }
  if (const char* c = g_options.confirm) {
    if (strcmp(c, "1") != 0) {
      Report("launch failed: --confirm: must be 1");
      return false;
    }
    g_confirm = true;
  }
  return true;
}

// Reports "launch failed: WHAT: strerror(errno)" and returns 127.
int LaunchFailed(const char* what) {
  char msg[160];
  snprintf(msg, sizeof msg, "launch failed: %s: %s", what, strerror(errno));
  Report(msg);
  return 127;
}

// The shim's own process: a session of its own, the agent's pipe kept from the task, and the
// signals it waits for blocked (Supervise takes them with sigwaitinfo).
sigset_t PrepareProcess() {
  setsid();                               // fails only if it leads a group already: fine
  fcntl(kStatusFd, F_SETFD, FD_CLOEXEC);  // the task must not hold the agent's pipe
  signal(SIGPIPE, SIG_IGN);               // fd 3's reader (the agent) may be gone
  signal(SIGCHLD, SIG_DFL);               // an inherited SIG_IGN would reap the task
  sigset_t waited;
  sigemptyset(&waited);
  const int kWaited[] = {SIGCHLD, SIGTERM, SIGUSR1, SIGINT, SIGHUP, SIGQUIT};
  for (int s : kWaited) sigaddset(&waited, s);
  sigprocmask(SIG_BLOCK, &waited, nullptr);
  return waited;
}

void KillTask(pid_t task) {
  kill(task, SIGKILL);
  waitpid(task, nullptr, 0);
}

// With --log-max-size: the thread that copies the task's output into its log. False (the
// task killed, the launch reported failed) when it cannot start.
bool StartPump(pid_t task, pthread_t* pump) {
  close(g_output_pipe[1]);  // the task's now: EOF when its last process closes it
  fcntl(g_output_pipe[0], F_SETPIPE_SZ, 1 << 20);  // fewer wake-ups; the default if refused
  if (pthread_create(pump, nullptr, &PumpOutput, nullptr) == 0) return true;
  KillTask(task);
  Report("launch failed: cannot start the thread that copies the task's output");
  return false;
}

// The run record, before the task may go on: its process group and start time. False (the
// task killed, the launch reported failed) when it cannot be written.
bool JournalRun(const char* dir, const char* run_name, pid_t task, journal::RunRecord run) {
  setpgid(task, task);  // also from here, so the group exists before the record names it
  run.task_pgid = task;
  journal::ProcessId task_id;
  if (journal::ReadProcessId(task, &task_id)) run.task_start_ticks = task_id.start_ticks;
  run.started_ms = NowMs();
  char text[512], error[512] = "journal: record too long";
  const size_t len = journal::FormatRun(run, text, sizeof text);
  // Not fsynced: the record only matters while the node stays up (after a reboot the
  // shim is gone whatever the disk says), and an atomic rename is enough for that.
  if (len > 0 && journal::WriteRecordAtomic(dir, run_name, text, len, false, error,
                                            sizeof error)) {
    return true;
  }
  KillTask(task);
  char msg[600];
  snprintf(msg, sizeof msg, "launch failed: %s", error);
  Report(msg);
  return false;
}

// The exit record, sealed next to the run record; said on fd 3 when it cannot be.
int JournalExit(const char* dir, const char* run_name, const char* exit_name, int status,
                int why_fd) {
  const journal::ExitRecord exit_record = ExitOf(status, why_fd);
  char text[512], error[512] = "journal: record too long";
  const size_t exit_len = journal::FormatExit(exit_record, text, sizeof text);
  if (exit_len == 0 ||
      !journal::SealExit(dir, run_name, exit_name, text, exit_len, error, sizeof error)) {
    char msg[900];
    snprintf(msg, sizeof msg, "%s%sthe exit could not be journaled (%s)", exit_record.reason,
             exit_record.reason[0] != '\0' ? "; " : "", error);
    Report(msg);
  }
  return exit_record.exit_code;
}

// argv[1..]: JOURNAL_DIR ID ATTEMPT PROGRAM ARGV0 [ARG...], after the options (kUsage).
struct ShimArgs {
  const char* dir = nullptr;
  char run_name[64], exit_name[64];
  const char* program = nullptr;
  char** task_argv = nullptr;  // ARGV0 [ARG...], null-terminated as main's argv
};

bool ParseArgs(int argc, char** argv, ShimArgs* out) {
  unsigned long long id = 0;
  long long attempt = 0;
  if (argc < 6 || !ParseKey(argv[2], argv[3], &id, &attempt) ||
      !journal::RecordName(out->run_name, sizeof out->run_name, id, attempt,
                           journal::kRunSuffix) ||
      !journal::RecordName(out->exit_name, sizeof out->exit_name, id, attempt,
                           journal::kExitSuffix)) {
    return false;
  }
  out->dir = argv[1];
  out->program = argv[4];
  out->task_argv = argv + 5;
  return true;
}

// With --confirm=1 (shim_confirm.h): asks the agent on fd 3 once the run record is written
// and waits for its answer. True: the agent said go (or --confirm was not given).
bool AgentConfirms() {
  if (!g_confirm) return true;
  if (write(kStatusFd, &gpusched::agent::kConfirmRequest, 1) != 1) return false;
  pollfd p{kStatusFd, POLLIN, 0};  // the socket may be non-blocking
  char answer = 0;
  for (;;) {
    if (poll(&p, 1, -1) < 0 && errno != EINTR) return false;
    const ssize_t n = read(kStatusFd, &answer, 1);
    if (n == 1) return answer == gpusched::agent::kConfirmAnswer;
    if (n == 0 || (errno != EINTR && errno != EAGAIN)) return false;
  }
}

// The agent did not confirm (it died, or gave up waiting): no later agent may adopt a task
// that never ran, so the run record goes, and the task is killed at its gate.
int AbandonLaunch(const ShimArgs& args, pid_t task) {
  KillTask(task);
  const int dir = open(args.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    unlinkat(dir, args.run_name, 0);
    close(dir);
  }
  Report("launch abandoned: the agent that started the task did not confirm its run record "
         "(it stopped, or gave up waiting); the task never ran");
  return 127;
}

// Starts the task (held at its gate until the run record is written), supervises it to its
// end and journals that. Returns the shim's exit code: the task's, or 127 when it could not
// be started.
int RunTask(const ShimArgs& args, const sigset_t& waited, const journal::RunRecord& run) {
  int gate[2], why[2];  // why: the child's reason when it cannot start the task
  if (pipe2(gate, O_CLOEXEC) != 0 || pipe2(why, O_CLOEXEC | O_NONBLOCK) != 0 ||
      (g_log_max > 0 && pipe2(g_output_pipe, O_CLOEXEC) != 0)) {
    return LaunchFailed("pipe");
  }
  const pid_t task = fork();
  if (task < 0) return LaunchFailed("fork");
  if (task == 0) {
    close(gate[1]);
    close(why[0]);
    ExecTask(gate[0], why[1], args.program, args.task_argv);
  }
  close(gate[0]);
  close(why[1]);
  pthread_t pump{};
  const bool pumping = g_output_pipe[1] >= 0;
  if (pumping && !StartPump(task, &pump)) return 127;
  if (!JournalRun(args.dir, args.run_name, task, run)) return 127;
  if (!AgentConfirms()) return AbandonLaunch(args, task);
  (void)!write(gate[1], "1", 1);
  close(gate[1]);

  const int status = Supervise(task, waited);
  if (pumping) {  // the output the task wrote before it ended is in the log before its exit
    g_task_done.store(true);
    pthread_join(pump, nullptr);
  }
  return JournalExit(args.dir, args.run_name, args.exit_name, status, why[0]);
}

}  // namespace

int main(int argc, char** argv) {
  const char* bad = nullptr;
  const int first = ParseOptions(argc, argv, &g_options, &bad);
  if (first < 0) {
    dprintf(2, "gpusched-shim: unknown option %s\n%s", bad, kUsage);
    return 2;
  }
  argc -= first - 1;
  argv += first - 1;  // argv[1] is JOURNAL_DIR from here on
  ShimArgs args;
  if (!ParseArgs(argc, argv, &args)) {
    dprintf(2, "%s", kUsage);
    return 2;
  }
  const sigset_t waited = PrepareProcess();
  if (!ApplyOptions()) return 127;
  journal::RunRecord run;
  if (!journal::ReadProcessId(getpid(), &run.shim)) {
    Report("launch failed: the task supervisor cannot read /proc (is it mounted?)");
    return 127;
  }
  return RunTask(args, waited, run);
}
