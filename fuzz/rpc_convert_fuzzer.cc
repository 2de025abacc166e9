// Wire -> core conversion (rpc/convert.h) of what clients and agents send: the input is
// parsed (ParseFromArray) as a SubmitRequest, an AgentMessage and a ListTasksRequest, and
// each message that parses goes through the conversion the server applies to it. A
// conversion either succeeds or is an InvalidArgument whose message starts with the field
// ("command[0]: ...", "register.gpus[1].total_mib: ..."); a spec that converts is then
// checked by admission (core::ValidateTaskSpec) and converts back and forth to the same
// message.

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>

#include <cstdio>
#include <string>

#include "core/task_validation.h"
#include "fuzz/fuzz_check.h"
#include "rpc/convert.h"

namespace {

using namespace gpusched;

// "a.b[2].c: ..." -> true: a non-empty field path, then ": ".
bool NamesField(const std::string& message) {
  const size_t colon = message.find(": ");
  if (colon == 0 || colon == std::string::npos) return false;
  for (size_t i = 0; i < colon; ++i) {
    const char c = message[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                    c == '[' || c == ']' || c == '-';
    if (!ok) return false;
  }
  return true;
}

void RequireRejection(const Status& s) {
  FUZZ_REQUIRE(s.code() == StatusCode::kInvalidArgument, s.ToString());
  FUZZ_REQUIRE(NamesField(s.message()), s.ToString());
}

// The message's bytes with map entries in key order, so that equal messages give equal bytes
// (the API's messages are lite: no reflection to compare them field by field).
std::string DeterministicBytes(const google::protobuf::MessageLite& m) {
  (void)m.ByteSizeLong();  // caches the sizes SerializeWithCachedSizes writes
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeWithCachedSizes(&coded);
  }
  return out;
}

// "0a 03 ..." : `protoc --decode_raw` reads a failing pair back (xxd -r -p first).
std::string Hex(const std::string& bytes) {
  std::string out;
  char byte[4];
  for (unsigned char c : bytes) {
    std::snprintf(byte, sizeof byte, "%02x ", c);
    out += byte;
  }
  return out;
}

// A value converted from the wire goes back to the wire and converts again to the same
// message.
template <typename Proto, typename Value, typename From, typename To>
void CheckRoundTrip(const Value& value, From from, To to) {
  Proto back;
  to(value, &back);
  auto again = from(back);
  FUZZ_REQUIRE(again.ok(), again.status().ToString());
  Proto back2;
  to(*again, &back2);
  const std::string a = DeterministicBytes(back), b = DeterministicBytes(back2);
  FUZZ_REQUIRE(a == b, Hex(a) + "\n  vs " + Hex(b));
}

void CheckTaskSpec(const v1::TaskSpec& p) {
  auto spec = rpc::TaskSpecFromProto(p);
  if (!spec.ok()) return RequireRejection(spec.status());
  const Status valid = core::ValidateTaskSpec(*spec);
  if (!valid.ok()) RequireRejection(valid);
  CheckRoundTrip<v1::TaskSpec>(*spec, rpc::TaskSpecFromProto, rpc::TaskSpecToProto);
}

void CheckRegisterNode(const v1::RegisterNode& p) {
  auto node = rpc::NodeSpecFromProto(p);
  if (!node.ok()) return RequireRejection(node.status());
  CheckRoundTrip<v1::RegisterNode>(*node, rpc::NodeSpecFromProto, rpc::NodeSpecToProto);
}

// Issue 40: an accepted array has at most kMaxArrayTasks indices, counted without overflow.
void CheckArray(const v1::IndexRange& p) {
  auto range = rpc::IndexRangeFromProto(p);
  if (!range.ok()) return RequireRejection(range.status());
  FUZZ_REQUIRE(range->first >= 0 && range->first <= range->last, "array accepted out of order");
  FUZZ_REQUIRE(range->last - range->first < core::kMaxArrayTasks, "array accepted too long");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Invalid UTF-8 in a string field fails the parse, and protobuf would log each one.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  const int n = static_cast<int>(size);
  if (v1::SubmitRequest submit; submit.ParseFromArray(data, n)) {
    CheckTaskSpec(submit.spec());
    if (submit.has_array()) CheckArray(submit.array());
  }
  if (v1::AgentMessage agent; agent.ParseFromArray(data, n) && agent.has_register_()) {
    CheckRegisterNode(agent.register_());
  }
  if (v1::ListTasksRequest list; list.ParseFromArray(data, n) && !list.state().empty()) {
    auto state = rpc::TaskStateFromName(list.state(), "state");
    if (!state.ok()) RequireRejection(state.status());
  }
  return 0;
}
