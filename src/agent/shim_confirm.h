#pragma once
// The start handshake between the agent and gpusched-shim on the shim's fd 3 (a socket):
// persist before act across an agent's kill -9. The shim journals its task's run record
// first, then sends kConfirmRequest and holds the task at its gate until the agent that
// started it answers kConfirmAnswer. The agent answers only while it lives, so a task runs
// only when its run record was on disk before that agent could die: a restarted agent, which
// reads the journal once at its start, either finds the record (and adopts the task) or the
// task never runs (the shim removes the record; the server, told nothing runs, places the
// task again). Without the handshake a shim spawned just before the agent's kill -9 wrote its
// record after the new agent had read the journal, and the task ran twice. Included by the
// shim: constants only.

namespace gpusched::agent {

// Shim to agent, once the run record is written.
inline constexpr char kConfirmRequest = '\0';
// Agent to shim: let the task go. Anything else, or EOF, and the task never runs.
inline constexpr char kConfirmAnswer = 'G';

}  // namespace gpusched::agent
