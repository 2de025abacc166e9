#include "cli/signals.h"

#include <pthread.h>
#include <signal.h>

namespace gpusched::cli {
namespace {

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void BlockStopSignals() {
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void BlockHangupSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForStopSignal(const std::function<void()>& on_hangup) {
  sigset_t set = StopSignals();
  sigaddset(&set, SIGHUP);
  for (;;) {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig != SIGHUP) return sig;
    on_hangup();
  }
}

int WaitForStopSignal() {
  const sigset_t set = StopSignals();
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

}  // namespace gpusched::cli
