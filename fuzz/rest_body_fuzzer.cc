// The REST API's parsers of outside input (server/rest_params.h): the JSON body of a task
// submission (ParseSubmitBody) and the query-parameter parsers, each fed the whole input.
// Beyond "no crash": every error is InvalidArgument whose message starts with the field or
// parameter it is about, and what parses has a command and no negative quantity.

#include <string>

#include "fuzz/fuzz_check.h"
#include "server/rest_params.h"

namespace {

using namespace gpusched;
namespace rest = server::rest;

void RequireFieldError(const Status& s, const std::string& field) {
  FUZZ_REQUIRE(s.code() == StatusCode::kInvalidArgument, s.ToString());
  FUZZ_REQUIRE(s.message().rfind(field, 0) == 0 || s.message().rfind("\"", 0) == 0,
               field + ": " + s.message());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(fuzz::Text(data, size));
  StatusOr<rest::SubmitBody> body = rest::ParseSubmitBody(input);
  if (body.ok()) {
    const core::TaskSpec& s = body->spec;
    FUZZ_REQUIRE(!s.command.empty(), "a parsed body without a command");
    FUZZ_REQUIRE(s.gpus >= 0 && s.gpu_mem_mib >= 0 && s.resources.mem_mib >= 0 &&
                     s.resources.cpu_milli >= 0 && s.duration_ms.value_or(0) >= 0 &&
                     s.max_retries.value_or(0) >= 0,
                 "a negative quantity parsed");
  } else {
    FUZZ_REQUIRE(body.status().code() == StatusCode::kInvalidArgument,
                 body.status().ToString());
  }

  const rest::Query q = {{"p", input}};
  if (auto v = rest::IntParam(q, "p", 1, 1000, 7); v.ok()) {
    FUZZ_REQUIRE(*v >= 1 && *v <= 1000, input);
  } else {
    RequireFieldError(v.status(), "p");
  }
  if (auto v = rest::StateParam(q, "p"); !v.ok()) RequireFieldError(v.status(), "p");
  if (auto v = rest::DurationParam(q, "p", 1); v.ok()) {
    FUZZ_REQUIRE(*v > 0, input);
  } else {
    RequireFieldError(v.status(), "p");
  }
  if (auto v = rest::TimeParam(q, "p", 2'000'000'000'000, 0); !v.ok()) {
    RequireFieldError(v.status(), "p");
  }
  if (auto v = rest::TaskIdParam(input); v.ok()) {
    FUZZ_REQUIRE(*v >= 1, input);
  } else {
    RequireFieldError(v.status(), "id");
  }
  return 0;
}
