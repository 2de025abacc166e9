// What an etcd endpoint sends back (store/etcd_client.h): the HTTP/1.1 answer (status line,
// headers, Content-Length, chunked bodies with trailers, or a body up to the close), read in
// pieces of any size, then the JSON gateway's range and txn answers and the header's cluster
// id. Any bytes are an answer or Unavailable/Internal/DataLoss; never a crash, a hang or an
// unbounded read.

#include "fuzz/fuzz_check.h"
#include "store/etcd_client.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  const std::string text(fuzz::Text(data, size));
  // The first byte picks how many bytes each read delivers (1..64), as a socket might.
  const size_t step = size > 0 ? (data[0] % 64) + 1 : 1;
  size_t at = 0;
  std::string buf;
  auto fill = [&](std::string& b) {
    if (at >= text.size()) return false;
    const size_t n = std::min(step, text.size() - at);
    b.append(text, at, n);
    at += n;
    return true;
  };
  auto answer = store::ReadHttpAnswer(fill, buf);
  if (!answer.ok()) {
    FUZZ_REQUIRE(answer.status().code() == StatusCode::kUnavailable, answer.status().ToString());
  } else {
    FUZZ_REQUIRE(answer->body.size() <= text.size(), std::to_string(answer->body.size()));
  }
  for (const std::string& body : {text, answer.ok() ? answer->body : std::string()}) {
    auto range = store::ParseRangeAnswer(body);
    FUZZ_REQUIRE(range.ok() || range.status().code() == StatusCode::kInternal ||
                     range.status().code() == StatusCode::kDataLoss,
                 range.status().ToString());
    auto txn = store::ParseTxnAnswer(body);
    FUZZ_REQUIRE(txn.ok() || txn.status().code() == StatusCode::kInternal ||
                     txn.status().code() == StatusCode::kDataLoss,
                 txn.status().ToString());
    // The header's cluster id (issue 39): whatever it reads, only from the first 512 bytes.
    const uint64_t cluster = store::AnswerClusterId(body);
    FUZZ_REQUIRE(cluster == store::AnswerClusterId(body.substr(0, 512)), std::to_string(cluster));
  }
  return 0;
}
