// What etcd answers over its gRPC API (issue 38: proto/etcd/, store/etcd_convert.h): any bytes
// parsed as a range, txn, watch or status answer (the first byte picks which) convert to the
// client's types without a crash, keeping every key-value and only the ranges of a txn; a
// request built from what was read parses back to the same keys.

#include "etcd/rpc.pb.h"
#include "fuzz/fuzz_check.h"
#include "store/etcd_convert.h"

namespace {
using namespace gpusched;

void CheckRange(const uint8_t* data, size_t size) {
  etcdserverpb::RangeResponse r;
  if (!r.ParseFromArray(data, static_cast<int>(size))) return;
  const store::EtcdRange out = store::FromRangeResponse(r);
  FUZZ_REQUIRE(out.kvs.size() == static_cast<size_t>(r.kvs_size()), "kvs lost");
  for (size_t i = 0; i < out.kvs.size(); ++i) {
    FUZZ_REQUIRE(out.kvs[i].key == r.kvs(static_cast<int>(i)).key(), "key changed");
    // What was read, written back as a put, carries the same bytes.
    const etcdserverpb::RequestOp op =
        store::ToRequestOp(store::EtcdOp::Put(out.kvs[i].key, out.kvs[i].value));
    FUZZ_REQUIRE(op.request_put().value() == out.kvs[i].value, "value changed");
  }
}

void CheckTxn(const uint8_t* data, size_t size) {
  etcdserverpb::TxnResponse r;
  if (!r.ParseFromArray(data, static_cast<int>(size))) return;
  const store::EtcdTxnResult out = store::FromTxnResponse(r);
  FUZZ_REQUIRE(out.ranges.size() <= static_cast<size_t>(r.responses_size()), "ranges invented");
  FUZZ_REQUIRE(out.succeeded == r.succeeded(), "outcome changed");
}

void CheckWatch(const uint8_t* data, size_t size) {
  etcdserverpb::WatchResponse r;
  if (!r.ParseFromArray(data, static_cast<int>(size))) return;
  auto out = store::FromWatchResponse(r);
  if (r.canceled()) {
    FUZZ_REQUIRE(!out.ok() && out.status().code() == StatusCode::kFailedPrecondition,
                 "a cancelled watch read as events");
  } else {
    FUZZ_REQUIRE(out.ok() && out->size() == static_cast<size_t>(r.events_size()), "events lost");
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 4) {
    case 0: CheckRange(body, n); break;
    case 1: CheckTxn(body, n); break;
    case 2: CheckWatch(body, n); break;
    default: {
      etcdserverpb::StatusResponse r;
      if (r.ParseFromArray(body, static_cast<int>(n))) {
        const store::EtcdMemberStatus m = store::FromStatusResponse("http://x:1", r);
        FUZZ_REQUIRE(!m.healthy || m.leader_id != 0, "healthy without a raft leader");
      }
    }
  }
  return 0;
}
