// The kube-scheduler extender's wire input (src/extender): its own JSON tape parser, the
// protocol's case-insensitive keys and null-as-missing, Kubernetes quantities and objects,
// and the four verbs, through Extender::HandleRequest with no cache and no API server (what
// a NodeList-mode request reaches). The first byte picks the verb; the rest is the body.
// Every input must get a well-formed JSON response (protocol: always 200, faults in Error):
// strict JSON for a UTF-8 request (all kube-scheduler sends, Go writes nothing else); for
// other bytes, what the extender echoes of the request stays as Go's decoder would read it.
// The same body is also read as one line of a watch stream (nodes and pods).

#include <nlohmann/json.hpp>

#include <string>

#include "base/clock.h"
#include "extender/extender.h"
#include "extender/json_reader.h"
#include "extender/json_writer.h"
#include "extender/kube_api_http.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  if (size == 0) return 0;
  static constexpr const char* kVerbs[] = {"filter", "prioritize", "bind", "preempt", "nope"};
  const std::string_view verb = kVerbs[data[0] % 5];
  const std::string body(fuzz::Text(data + 1, size - 1));  // outlives every view of it
  static FakeClock clock(1'000'000);
  extender::Extender ext(extender::ExtenderConfig(), clock, nullptr, nullptr);
  const std::string response = ext.HandleRequest(verb, body);
  if (extender::IsValidUtf8(body)) {
    FUZZ_REQUIRE(nlohmann::json::accept(response), std::string(verb) + " -> " + response);
  } else {
    FUZZ_REQUIRE(extender::JsonDoc::Parse(response, "response").ok(), std::string(verb) + " -> " + response);
  }
  (void)extender::ParseNodeWatchEvent(body);
  (void)extender::ParsePodWatchEvent(body);
  return 0;
}
