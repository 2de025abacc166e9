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

// The JSON shapes are shared with the server's REST API (rpc/json.h).
using rpc::NodeJson;
using rpc::TaskJson;
using rpc::WhyJson;
// Columns padded to the widest cell; the first row is the header.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows);
std::string JoinInts(const google::protobuf::RepeatedField<int32_t>& v);
// "12.5s ago"-style age of a Unix-ms timestamp relative to `now_ms`; "-" for 0.
std::string Age(int64_t at_ms, int64_t now_ms);

}  // namespace gpusched::cli
