#pragma once
// The JSON shapes of gpusched.v1 messages that the command line prints (`ls/show/nodes/why
// --json`) and the REST API serves (/api/v1): one definition, so a script can read either.
// Keys of TaskJson are part of the command-line contract (DESIGN.md, `ls --json`).

#include <nlohmann/json.hpp>

#include <string>

#include "gpusched/v1/gpusched.pb.h"

namespace gpusched::rpc {

// id, name, state, node, gpus, exit_code (null if none), attempts, reason, fail_cnt, pt,
// gpu_mem_mib, submitted_ms, started_ms, finished_ms, command, request{} (what was asked
// for), workdir, elapsed_ms (run time of the current or last attempt at `now_ms`), gpu_util and
// gpu_mem_used_mib (null unless running and reported), idle_since_ms, idle; history when the
// message has it.
nlohmann::json TaskJson(const ::gpusched::v1::Task& t, int64_t now_ms);
// Run time of the current (or last) attempt at `now_ms`; 0 if it never started.
int64_t ElapsedMs(const ::gpusched::v1::Task& t, int64_t now_ms);
// One word for a node's health and scheduling state: disconnected, lost, unreachable,
// draining (tasks still running), drained, cordoned or ready (the first that applies).
std::string NodeStateName(const ::gpusched::v1::Node& n);
// name, address, connected, reachable, available, cordoned, draining, running_tasks, gpus[].
nlohmann::json NodeJson(const ::gpusched::v1::Node& n);
// id, state, summary, queue, pt, st, claim_status, fail_cnt, placement_failures, total_nodes,
// feasible_nodes, examined_nodes, chosen_node, rejected{filter: nodes}, score, breakdown[{name,value,weight}].
nlohmann::json WhyJson(const ::gpusched::v1::WhyResponse& w);

}  // namespace gpusched::rpc
