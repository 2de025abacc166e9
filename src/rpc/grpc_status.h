#pragma once
// Mapping between gpusched's Status and grpc::Status (both directions), so errors keep their
// code and message across the wire.

#include <grpcpp/support/status.h>

#include "base/status.h"

namespace gpusched::rpc {

grpc::Status ToGrpc(const Status& status);
Status FromGrpc(const grpc::Status& status);

}  // namespace gpusched::rpc
