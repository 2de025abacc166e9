#pragma once
// How the client commands print: aligned tables for people, JSON (--json) for scripts.
// `ls --json` keys are part of the command-line contract (DESIGN.md).

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <string>
#include <vector>

#include "gpusched/v1/gpusched.pb.h"
#include "rpc/json.h"

namespace gpusched::cli {

// The JSON shapes are shared with the server's REST API (rpc/json.h). TaskJson also carries
// the request (what was asked for), workdir, and elapsed_ms (run time so far, at `now_ms`).
using rpc::ElapsedMs;
using rpc::NodeJson;
using rpc::TaskJson;
using rpc::WhyJson;
// What the task asked for, as a user writes it: "2 GPUs x 6GiB, 4 CPU, 16GiB RAM, 2h limit".
std::string DescribeRequest(const ::gpusched::v1::TaskSpec& s);
// Columns padded to the widest cell; the first row is the header.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows);
std::string JoinInts(const google::protobuf::RepeatedField<int32_t>& v);
// "12.5s ago"-style age of a Unix-ms timestamp relative to `now_ms`; "-" for 0.
std::string Age(int64_t at_ms, int64_t now_ms);
// Now as Unix ms (the wall clock: records' times are compared with it, never durations).
int64_t NowMs();

}  // namespace gpusched::cli
