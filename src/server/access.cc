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

bool OwnsOrAdmin(const Caller& caller, const v1::Task& task) {
  const std::string& owner = task.spec().user();
  return caller.admin || (!owner.empty() && owner == caller.user);
}

void RedactForCaller(const Caller& caller, bool private_data, v1::Task* task) {
  if (OwnsOrAdmin(caller, *task)) return;
  v1::TaskSpec* spec = task->mutable_spec();
  spec->clear_env();  // names too: a name can say what the secret is for
  task->add_redacted("env");
  if (!private_data) return;
  spec->clear_command();
  task->add_redacted("command");
  spec->clear_workdir();
  task->add_redacted("workdir");
}

Status RequireOwnerOrAdmin(const Caller& caller, const v1::Task& task, const std::string& what) {
  if (OwnsOrAdmin(caller, task)) return Status::Ok();
  const std::string& owner = task.spec().user();
  return PermissionDenied("permission denied: " + Who(caller) + " may not " + what + " (it " +
                          (owner.empty() ? std::string("records no owner")
                                         : "belongs to " + owner) +
                          "; only its owner or an admin may)");
}

}  // namespace gpusched::server
