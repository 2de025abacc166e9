#include "server/access.h"

namespace gpusched::server {
namespace {

std::string Who(const Caller& c) { return c.user.empty() ? "an unnamed caller" : c.user; }

}  // namespace

Status RequireAdmin(const Caller& caller, const std::string& what) {
  if (caller.admin) return Status::Ok();
  return PermissionDenied("permission denied: " + what + " is for admins only (" + Who(caller) +
                          " is not an admin)");
}

Status RequireOwnerOrAdmin(const Caller& caller, const v1::Task& task, const std::string& what) {
  if (caller.admin) return Status::Ok();
  const std::string& owner = task.spec().user();
  if (!owner.empty() && owner == caller.user) return Status::Ok();
  return PermissionDenied("permission denied: " + Who(caller) + " may not " + what + " (it " +
                          (owner.empty() ? std::string("records no owner")
                                         : "belongs to " + owner) +
                          "; only its owner or an admin may)");
}

}  // namespace gpusched::server
