#pragma once
// How the long-running commands (server, agent, dev, extender) stop: SIGINT and SIGTERM are
// blocked in every thread and taken by sigwait in the main thread.

namespace gpusched::cli {

// Blocks SIGINT and SIGTERM in the calling thread (call before starting threads, so they
// inherit the mask).
void BlockStopSignals();
// Returns once SIGINT or SIGTERM arrives; the signal.
int WaitForStopSignal();

}  // namespace gpusched::cli
