// ControlPlane: operating a long-lived server (issue 39): `node rm` and `admin reload`.

#include "server/control_plane.h"

#include "base/log.h"

namespace gpusched::server {
namespace {

std::string Joined(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out.empty() ? "none" : out;
}

}  // namespace

StatusOr<std::vector<TaskId>> ControlPlane::RemoveNode(const std::string& node, bool force) {
  std::unique_lock<std::mutex> lock(mu_);
  GS_ASSIGN_OR_RETURN(std::vector<TaskId> requeued, sched_->RemoveNode(node, force));
  pipeline_.pending().nodes.erase(node);
  pipeline_.pending().removed_nodes.insert(node);
  agents_.ForgetProbes(node);
  // The requeued tasks' records and the deletion, then the kills (sent while the agent is
  // still connected, by the commit that makes them durable).
  Status stored = CommitThrough(lock, StageChanges());
  if (std::shared_ptr<AgentChannel> channel = agents_.Remove(node)) channel->Close();
  logging::Info("server",
                "node " + node + " removed" +
                    (requeued.empty() ? "" : " (" + std::to_string(requeued.size()) +
                                                 " tasks requeued: --force)") +
                    (stored.ok() ? "" : "; its deletion is retried: " + stored.message()),
                logging::NodeF(node));
  lock.unlock();
  Kick();
  GS_RETURN_IF_ERROR(stored);
  return requeued;
}

StatusOr<ConfigReload> ControlPlane::ReloadConfig() {
  std::lock_guard<std::mutex> reloading(reload_mu_);
  if (!reloader_) {
    return FailedPrecondition(
        "reload: this server was started without --config: there is no file to read again");
  }
  StatusOr<ConfigReload> plan = reloader_->Plan();
  if (!plan.ok()) {  // the file, not the caller's request, is wrong: exit 1, not a usage error
    logging::Error("server", "config reload refused: " + plan.status().message());
    return FailedPrecondition("reload: " + plan.status().message() + "; nothing was changed");
  }
  ConfigReload r = std::move(plan).value();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Status s = sched_->ApplyLiveConfig(r.next.scheduler); !s.ok()) {
      return FailedPrecondition("reload: " + s.message() + "; nothing was changed");
    }
  }
  reloader_->Accept(r);
  logging::Info("server", "config " + r.file + " reloaded; applied: " + Joined(r.applied) +
                              "; changed but need a restart: " + Joined(r.needs_restart));
  Kick();
  return r;
}

}  // namespace gpusched::server
