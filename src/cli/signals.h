#pragma once
// How the long-running commands (server, agent, dev, extender) stop: SIGINT and SIGTERM are
// blocked in every thread and taken by sigwait in the main thread.

#include <functional>

namespace gpusched::cli {

// Blocks SIGINT and SIGTERM in the calling thread (call before starting threads, so they
// inherit the mask).
void BlockStopSignals();
// Returns once SIGINT or SIGTERM arrives; the signal.
int WaitForStopSignal();
// Issue 39 (the server): blocks SIGHUP as well (call with BlockStopSignals, before threads
// start), then waits like WaitForStopSignal, calling `on_hangup` for each SIGHUP meanwhile.
void BlockHangupSignal();
int WaitForStopSignal(const std::function<void()>& on_hangup);

}  // namespace gpusched::cli
