#pragma once
// Parsers of the REST API's external input: query parameters and the JSON body of a task
// submission. Every error is InvalidArgument naming the parameter (or JSON field) and quoting
// the value, which the API answers as 400. Pure functions: no server state, no I/O, so the
// fuzz target (fuzz/rest_body_fuzzer.cc) and the unit tests drive them directly.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "base/status.h"
#include "core/task.h"

namespace gpusched::server::rest {

// A request's query, one value per name (httplib's multimap, flattened).
using Query = std::map<std::string, std::string>;

// Flattens `params`; a name given twice, or one not in `allowed`, is an error naming it.
StatusOr<Query> CheckQuery(const std::multimap<std::string, std::string>& params,
                           const std::set<std::string>& allowed);

// A whole number in [min, max]; absent = `fallback`.
StatusOr<int64_t> IntParam(const Query& q, const std::string& name, int64_t min, int64_t max,
                           int64_t fallback);
// A task state name (pending, assigned, running, succeeded, failed, cancelled); absent = none.
StatusOr<std::optional<core::TaskState>> StateParam(const Query& q, const std::string& name);
// A duration ("90s", "15m", "2h"), in ms, > 0; absent = `fallback`.
StatusOr<int64_t> DurationParam(const Query& q, const std::string& name, int64_t fallback);
// A point in time: a duration before `now_ms` ("2h" = two hours ago) or a Unix time in ms
// (a bare number of at least 10^12); absent = `fallback`.
StatusOr<int64_t> TimeParam(const Query& q, const std::string& name, int64_t now_ms,
                            int64_t fallback);
// A task id in a path ("/tasks/17"): a number >= 1.
StatusOr<uint64_t> TaskIdParam(const std::string& text);

// The JSON body of POST /api/v1/tasks: every field of a job file (docs/job-spec.md), with
// the same keys and values, read by the job file's own parser (spec::ParseJobFileNode), e.g.
//   {"command": ["python3", "train.py"], "name": "t", "gpus": 2, "gpu_mem": "6GiB",
//    "cpu": 1.5, "mem": "4GiB", "time": "2h", "workdir": "/data/run", "priority": "high",
//    "tolerations": [{"key": "dedicated", "value": "infer"}], "idempotency_key": "k"}
// A number stands for its text ("gpu_mem": 4096 is "4096", MiB; "duration": 90 is 90 s);
// null is "not given". Only "command" is required. REST-only: "idempotency_key" and "array".
// `export` is refused (a REST call has no shell environment to take variables from; "env"
// carries them) and a relative `workdir` too (nothing to resolve it from). Unknown fields
// are errors listing the known ones (a typo must not be silently ignored). The spec is not
// validated further here: the scheduler does it on submit.
struct SubmitBody {
  core::TaskSpec spec;
  std::string idempotency_key;
  std::optional<IndexRange> array;  // "array": "0-999", a job array
};
StatusOr<SubmitBody> ParseSubmitBody(std::string_view body);

}  // namespace gpusched::server::rest
