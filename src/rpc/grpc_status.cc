#include "rpc/grpc_status.h"

namespace gpusched::rpc {

grpc::Status ToGrpc(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return grpc::Status::OK;
    case StatusCode::kInvalidArgument: return {grpc::StatusCode::INVALID_ARGUMENT, s.message()};
    case StatusCode::kNotFound: return {grpc::StatusCode::NOT_FOUND, s.message()};
    case StatusCode::kAlreadyExists: return {grpc::StatusCode::ALREADY_EXISTS, s.message()};
    case StatusCode::kFailedPrecondition:
      return {grpc::StatusCode::FAILED_PRECONDITION, s.message()};
    case StatusCode::kResourceExhausted:
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, s.message()};
    case StatusCode::kUnavailable: return {grpc::StatusCode::UNAVAILABLE, s.message()};
    case StatusCode::kDataLoss: return {grpc::StatusCode::DATA_LOSS, s.message()};
    // ABORTED: "retry at a higher level" is exactly what a client may do with the same
    // idempotency key.
    case StatusCode::kNotStored: return {grpc::StatusCode::ABORTED, s.message()};
    case StatusCode::kUnauthenticated: return {grpc::StatusCode::UNAUTHENTICATED, s.message()};
    case StatusCode::kPermissionDenied:
      return {grpc::StatusCode::PERMISSION_DENIED, s.message()};
    case StatusCode::kInternal: break;
  }
  return {grpc::StatusCode::INTERNAL, s.message()};
}

Status FromGrpc(const grpc::Status& s) {
  const std::string& m = s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::OK: return Status::Ok();
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE: return InvalidArgument(m);
    case grpc::StatusCode::NOT_FOUND: return NotFound(m);
    case grpc::StatusCode::ALREADY_EXISTS: return AlreadyExists(m);
    case grpc::StatusCode::FAILED_PRECONDITION: return FailedPrecondition(m);
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return ResourceExhausted(m);
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED: return Unavailable(m.empty() ? "unavailable" : m);
    case grpc::StatusCode::DATA_LOSS: return DataLoss(m);
    case grpc::StatusCode::ABORTED: return NotStored(m);
    case grpc::StatusCode::UNAUTHENTICATED: return Unauthenticated(m);
    case grpc::StatusCode::PERMISSION_DENIED: return PermissionDenied(m);
    default: return Internal(m);
  }
}

}  // namespace gpusched::rpc
