#pragma once
// Conversion between the etcd client's types (etcd_client.h) and etcd's gRPC messages
// (proto/etcd/, generated into etcd/rpc.pb.h): the only code that touches those messages'
// fields, so that the wire is checked in one place. Fuzzed (fuzz/etcd_convert_fuzzer.cc):
// any bytes parsed as an etcd answer convert without crashing.
//
// Pure: no I/O, no clock.

#include <string>
#include <vector>

#include "base/status.h"
#include "etcd/rpc.pb.h"
#include "store/etcd_client.h"

namespace gpusched::store {

etcdserverpb::RequestOp ToRequestOp(const EtcdOp& op);
etcdserverpb::RangeRequest ToRangeRequest(const EtcdOp& op, int64_t revision);
etcdserverpb::Compare ToCompare(const EtcdCompare& c);
etcdserverpb::TxnRequest ToTxnRequest(const std::vector<EtcdCompare>& compare,
                                      const std::vector<EtcdOp>& success,
                                      const std::vector<EtcdOp>& failure);

EtcdKv FromKeyValue(const mvccpb::KeyValue& kv);
EtcdRange FromRangeResponse(const etcdserverpb::RangeResponse& r);
// The branch's range answers, in order (its put and delete answers are not kept).
EtcdTxnResult FromTxnResponse(const etcdserverpb::TxnResponse& r);
// The watch answer's events; FailedPrecondition when etcd cancelled the watch (compacted
// revision or another reason), naming it.
StatusOr<std::vector<EtcdEvent>> FromWatchResponse(const etcdserverpb::WatchResponse& r);
// One member's status; `endpoint` is copied into it.
EtcdMemberStatus FromStatusResponse(const std::string& endpoint,
                                    const etcdserverpb::StatusResponse& r);

}  // namespace gpusched::store
