// gpusched-shim: the supervisor of one task, like containerd's shim or Slurm's slurmstepd.
// The agent (ProcessRunner) starts one per task as
//
//     gpusched-shim JOURNAL_DIR ID ATTEMPT PROGRAM ARGV0 [ARG...]
//
// with the task's environment as its own, stdin on /dev/null, stdout and stderr on the
// task's log, fd 3 the write end of the agent's status pipe, and SIGTERM, SIGINT, SIGHUP,
// SIGQUIT, SIGUSR1, SIGCHLD and the job-control stops blocked (so none is lost, and nothing
// stops it, before it waits for them).
//
// The shim is not tied to the agent's life: its first act is to lead a session of its own
// (away from the agent's process group and terminal), it has no parent-death signal, and it
// outlives an agent restart; the next agent adopts it through the journal. (Under systemd,
// the agent's unit needs KillMode=process, or stopping the agent kills its whole cgroup.)
//  1. It forks the task into a process group of its own and, before the task execs, writes
//     JOURNAL_DIR/ID.ATTEMPT.run (its own identity, the task's group).
//  2. SIGTERM is forwarded to the task's group, followed by SIGCONT (a stopped task would
//     not act on it); SIGUSR1 becomes SIGKILL of the group (a SIGKILL sent to the shim
//     itself would kill the shim, not the task).
//  3. When the task exits it kills what is left of the group, seals the record as
//     ID.ATTEMPT.exit (exit lines appended, fsynced, renamed: it stays until the server has
//     it), and exits with the task's exit code.
// With GPUSCHED_TASK_CREDS (task_credentials.h: the agent is root and the task runs as its
// user) the task's child drops to that uid, gid and supplementary groups before it execs;
// the shim itself stays root, to journal and to signal the task's group. A drop that fails
// fails the task (exit 127, the reason in its log), never runs it as root.
// What it cannot journal (the .run or .exit record cannot be written, fork fails) it writes
// as one line to fd 3 and to the log, so the agent that started it can report it.
//
// Every task's start goes through this program, so it is kept lean: libc only (no
// iostream, no allocation), one fork, a handful of system calls.

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/journal_record.h"
#include "agent/rank_launcher.h"
#include "agent/task_credentials.h"

namespace {

namespace journal = gpusched::agent::journal;

constexpr int kStatusFd = 3;

// The task's identity when it is not the shim's (parsed before the fork; read by the child).
gpusched::agent::TaskCredentials g_creds;
bool g_drop = false;

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
  unsetenv("GPUSCHED_TASK_CPUS");
}

// The forked child: leads its own group, waits until the shim has recorded it (EOF on the
// gate means the shim could not, and the task must not run), then execs the task.
[[noreturn]] void ExecTask(int gate, const char* program, char** argv) {
  setpgid(0, 0);
  char go = 0;
  ssize_t n;
  do {
    n = read(gate, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(127);
  if (g_drop) {
    const char* step = "";
    if (const int err = gpusched::agent::DropToCredentials(g_creds, &step); err != 0) {
      dprintf(2, "gpusched-shim: cannot run the task as uid %u gid %u: %s: %s\n",
              static_cast<unsigned>(g_creds.uid), static_cast<unsigned>(g_creds.gid), step,
              strerror(err));
      _exit(127);
    }
  }
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // The task's LD_PRELOAD reaches the shim under another name (a preload must not load into
  // the shim itself: under ASan it would come before the sanitizer runtime) and becomes
  // LD_PRELOAD for the task only.
  if (const char* cpus = getenv("GPUSCHED_TASK_CPUS")) PinToCpus(cpus);
  if (const char* preload = getenv("GPUSCHED_TASK_LD_PRELOAD")) {
    setenv("LD_PRELOAD", preload, 1);
    unsetenv("GPUSCHED_TASK_LD_PRELOAD");
  }
  // --tasks-per-node K: this process leads the task's group and starts the K copies.
  if (const char* k = getenv(gpusched::agent::kTasksPerNodeEnv)) {
    const int copies = atoi(k);
    if (copies >= 2 && copies <= gpusched::agent::kMaxTasksPerNode) {
      _exit(gpusched::agent::RunRanks(copies, program, argv));
    }
    unsetenv(gpusched::agent::kTasksPerNodeEnv);
  }
  execv(program, argv);
  dprintf(2, "gpusched-shim: cannot exec %s: %s\n", program, strerror(errno));
  _exit(127);
}

// Forwards kill requests until the task leader exits; returns its wait status.
int Supervise(pid_t task, const sigset_t& waited) {
  for (;;) {
    siginfo_t info;
    const int sig = sigwaitinfo(&waited, &info);
    if (sig == SIGTERM) {
      kill(-task, SIGTERM);
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

bool ParseKey(const char* id_text, const char* attempt_text, unsigned long long* id,
              long long* attempt) {
  char* end = nullptr;
  errno = 0;
  *id = strtoull(id_text, &end, 10);
  if (errno != 0 || *end != '\0' || end == id_text) return false;
  *attempt = strtoll(attempt_text, &end, 10);
  return errno == 0 && *end == '\0' && end != attempt_text && *attempt >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long long id = 0;
  long long attempt = 0;
  char run_name[64], exit_name[64];
  if (argc < 6 || !ParseKey(argv[2], argv[3], &id, &attempt) ||
      !journal::RecordName(run_name, sizeof run_name, id, attempt, journal::kRunSuffix) ||
      !journal::RecordName(exit_name, sizeof exit_name, id, attempt, journal::kExitSuffix)) {
    dprintf(2, "usage: gpusched-shim JOURNAL_DIR ID ATTEMPT PROGRAM ARGV0 [ARG...]\n"
               "(started by the gpusched agent, one per task)\n");
    return 2;
  }
  const char* dir = argv[1];
  setsid();                               // fails only if it leads a group already: fine
  fcntl(kStatusFd, F_SETFD, FD_CLOEXEC);  // the task must not hold the agent's pipe
  signal(SIGPIPE, SIG_IGN);               // fd 3's reader (the agent) may be gone
  signal(SIGCHLD, SIG_DFL);               // an inherited SIG_IGN would reap the task
  sigset_t waited;
  sigemptyset(&waited);
  const int kWaited[] = {SIGCHLD, SIGTERM, SIGUSR1, SIGINT, SIGHUP, SIGQUIT};
  for (int s : kWaited) sigaddset(&waited, s);
  sigprocmask(SIG_BLOCK, &waited, nullptr);

  if (const char* creds = getenv(gpusched::agent::kTaskCredsEnv)) {
    if (!gpusched::agent::ParseTaskCredentials(creds, &g_creds)) {
      Report("launch failed: the task's credentials (GPUSCHED_TASK_CREDS) do not parse");
      return 127;
    }
    g_drop = true;
    unsetenv(gpusched::agent::kTaskCredsEnv);  // the task need not see it
  }
  journal::RunRecord run;
  if (!journal::ReadProcessId(getpid(), &run.shim)) {
    Report("launch failed: the task supervisor cannot read /proc (is it mounted?)");
    return 127;
  }
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0) {
    char msg[128];
    snprintf(msg, sizeof msg, "launch failed: pipe: %s", strerror(errno));
    Report(msg);
    return 127;
  }
  const pid_t task = fork();
  if (task < 0) {
    char msg[128];
    snprintf(msg, sizeof msg, "launch failed: fork: %s", strerror(errno));
    Report(msg);
    return 127;
  }
  if (task == 0) {
    close(gate[1]);
    ExecTask(gate[0], argv[4], argv + 5);
  }
  close(gate[0]);
  setpgid(task, task);  // also from here, so the group exists before the record names it
  run.task_pgid = task;
  journal::ProcessId task_id;
  if (journal::ReadProcessId(task, &task_id)) run.task_start_ticks = task_id.start_ticks;
  run.started_ms = NowMs();
  char text[512], error[512] = "journal: record too long";
  const size_t len = journal::FormatRun(run, text, sizeof text);
  // Not fsynced: the record only matters while the node stays up (after a reboot the
  // shim is gone whatever the disk says), and an atomic rename is enough for that.
  if (len == 0 || !journal::WriteRecordAtomic(dir, run_name, text, len, false, error,
                                              sizeof error)) {
    kill(task, SIGKILL);
    waitpid(task, nullptr, 0);
    char msg[600];
    snprintf(msg, sizeof msg, "launch failed: %s", error);
    Report(msg);
    return 127;
  }
  (void)!write(gate[1], "1", 1);
  close(gate[1]);

  const int status = Supervise(task, waited);
  journal::ExitRecord exit_record;
  if (WIFSIGNALED(status)) {
    exit_record.exit_code = 128 + WTERMSIG(status);
    snprintf(exit_record.reason, sizeof exit_record.reason, "killed by signal %d",
             WTERMSIG(status));
  } else {
    exit_record.exit_code = WEXITSTATUS(status);
  }
  exit_record.finished_ms = NowMs();
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
