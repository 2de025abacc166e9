// The SQLite store's record codec (store/record_codec.h), over one text read as a task, a
// node, a memory-profile record and a rollup row (issue 38). A corrupt record is DataLoss,
// never a crash; a record that decodes re-encodes to a text that decodes again to the same
// record (compared through its encoding, which is canonical).

#include <string>

#include "fuzz/fuzz_check.h"
#include "store/record_codec.h"

namespace {

using namespace gpusched;

template <typename Record, typename Decode, typename Encode>
void RoundTrip(const std::string& text, Decode decode, Encode encode) {
  StatusOr<Record> first = decode(text);
  if (!first.ok()) {
    FUZZ_REQUIRE(first.status().code() == StatusCode::kDataLoss, first.status().ToString());
    return;
  }
  const std::string encoded = encode(*first);
  StatusOr<Record> second = decode(encoded);
  FUZZ_REQUIRE(second.ok(), second.status().ToString() + "\n  re-encoded: " + encoded);
  const std::string again = encode(*second);
  FUZZ_REQUIRE(again == encoded, "decode(encode(r)) != r\n  first:  " + encoded +
                                     "\n  second: " + again);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fuzz::Text(data, size));
  RoundTrip<store::TaskRecord>(text, store::DecodeTask, store::EncodeTask);
  RoundTrip<store::NodeRecord>(text, store::DecodeNode, store::EncodeNode);
  RoundTrip<core::MemoryProfile>(text, store::DecodeProfile, store::EncodeProfile);
  RoundTrip<store::RollupRow>(text, store::DecodeRollup, store::EncodeRollup);
  return 0;
}
