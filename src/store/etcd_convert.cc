#include "store/etcd_convert.h"

namespace gpusched::store {

etcdserverpb::RangeRequest ToRangeRequest(const EtcdOp& op, int64_t revision) {
  etcdserverpb::RangeRequest r;
  r.set_key(op.key);
  r.set_range_end(op.range_end);
  r.set_limit(op.limit);
  r.set_revision(revision);
  return r;
}

etcdserverpb::RequestOp ToRequestOp(const EtcdOp& op) {
  etcdserverpb::RequestOp out;
  switch (op.kind) {
    case EtcdOp::Kind::kPut: {
      etcdserverpb::PutRequest* p = out.mutable_request_put();
      p->set_key(op.key);
      p->set_value(op.value);
      p->set_lease(op.lease);
      break;
    }
    case EtcdOp::Kind::kDelete: {
      etcdserverpb::DeleteRangeRequest* d = out.mutable_request_delete_range();
      d->set_key(op.key);
      d->set_range_end(op.range_end);
      break;
    }
    case EtcdOp::Kind::kRange:
      *out.mutable_request_range() = ToRangeRequest(op, 0);
      break;
  }
  return out;
}

etcdserverpb::Compare ToCompare(const EtcdCompare& c) {
  etcdserverpb::Compare out;
  out.set_result(etcdserverpb::Compare::EQUAL);
  out.set_key(c.key);
  switch (c.target) {
    case EtcdCompare::Target::kCreateRevision:
      out.set_target(etcdserverpb::Compare::CREATE);
      out.set_create_revision(c.number);
      break;
    case EtcdCompare::Target::kModRevision:
      out.set_target(etcdserverpb::Compare::MOD);
      out.set_mod_revision(c.number);
      break;
    case EtcdCompare::Target::kVersion:
      out.set_target(etcdserverpb::Compare::VERSION);
      out.set_version(c.number);
      break;
    case EtcdCompare::Target::kValue:
      out.set_target(etcdserverpb::Compare::VALUE);
      out.set_value(c.value);
      break;
  }
  return out;
}

etcdserverpb::TxnRequest ToTxnRequest(const std::vector<EtcdCompare>& compare,
                                      const std::vector<EtcdOp>& success,
                                      const std::vector<EtcdOp>& failure) {
  etcdserverpb::TxnRequest r;
  for (const EtcdCompare& c : compare) *r.add_compare() = ToCompare(c);
  for (const EtcdOp& op : success) *r.add_success() = ToRequestOp(op);
  for (const EtcdOp& op : failure) *r.add_failure() = ToRequestOp(op);
  return r;
}

EtcdKv FromKeyValue(const mvccpb::KeyValue& kv) {
  EtcdKv out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

EtcdRange FromRangeResponse(const etcdserverpb::RangeResponse& r) {
  EtcdRange out;
  out.kvs.reserve(static_cast<size_t>(r.kvs_size()));
  for (const mvccpb::KeyValue& kv : r.kvs()) out.kvs.push_back(FromKeyValue(kv));
  out.more = r.more();
  out.count = r.count();
  out.revision = r.header().revision();
  return out;
}

EtcdTxnResult FromTxnResponse(const etcdserverpb::TxnResponse& r) {
  EtcdTxnResult out;
  out.succeeded = r.succeeded();
  out.revision = r.header().revision();
  for (const etcdserverpb::ResponseOp& op : r.responses()) {
    if (op.response_case() == etcdserverpb::ResponseOp::kResponseRange) {
      out.ranges.push_back(FromRangeResponse(op.response_range()));
      out.ranges.back().revision = out.revision;
    }
  }
  return out;
}

StatusOr<std::vector<EtcdEvent>> FromWatchResponse(const etcdserverpb::WatchResponse& r) {
  if (r.canceled()) {
    if (r.compact_revision() > 0) {
      return FailedPrecondition("etcd: the watch's start revision was compacted (etcd keeps "
                                "revisions from " + std::to_string(r.compact_revision()) + ")");
    }
    return FailedPrecondition("etcd cancelled the watch: " +
                              (r.cancel_reason().empty() ? std::string("no reason given")
                                                         : r.cancel_reason()));
  }
  std::vector<EtcdEvent> out;
  for (const mvccpb::Event& e : r.events()) {
    EtcdEvent ev;
    ev.kind = e.type() == mvccpb::Event::DELETE ? EtcdEvent::Kind::kDelete : EtcdEvent::Kind::kPut;
    ev.kv = FromKeyValue(e.kv());
    out.push_back(std::move(ev));
  }
  return out;
}

EtcdMemberStatus FromStatusResponse(const std::string& endpoint,
                                    const etcdserverpb::StatusResponse& r) {
  EtcdMemberStatus m;
  m.endpoint = endpoint;
  m.healthy = true;
  m.version = r.version();
  m.member_id = r.header().member_id();
  m.leader_id = r.leader();
  m.db_size = r.dbsize();
  m.raft_term = static_cast<int64_t>(r.raftterm());
  if (r.errors_size() > 0) {
    m.healthy = false;
    m.error = r.errors(0);
  }
  if (m.leader_id == 0) {
    m.healthy = false;
    if (m.error.empty()) m.error = "no raft leader";
  }
  return m;
}

}  // namespace gpusched::store
