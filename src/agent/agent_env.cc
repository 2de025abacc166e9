#include "agent/agent_env.h"

#include <filesystem>
#include <fstream>

#include "agent/cluster_identity.h"
#include "base/private_dir.h"

namespace gpusched::agent {

std::map<int, std::string> RealAgentEnv::NumaCpus() {
  std::map<int, std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(node_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4) continue;
    int node = -1;
    try {
      node = std::stoi(name.substr(4));
    } catch (const std::exception&) {  // not nodeN
      continue;
    }
    std::ifstream in(entry.path() / "cpulist");
    std::string list;
    if (std::getline(in, list) && !list.empty()) out[node] = list;
  }
  return out;
}

StatusOr<DataDir> RealAgentEnv::OpenDataDir(const std::string& path) {
  // Everything the agent trusts lives here: only its user may own or write it.
  GS_RETURN_IF_ERROR(EnsurePrivateDir(path, "data-dir"));
  DataDir dir;
  dir.path = path;
  std::error_code ec;
  // Absolute, so the paths handed to the shims and shown in errors do not depend on the
  // working directory.
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (!ec) dir.path = absolute.lexically_normal().string();
  dir.log_dir = dir.path + "/logs";
  std::filesystem::create_directories(dir.log_dir, ec);
  if (ec) return InvalidArgument("data-dir: cannot create " + dir.log_dir + ": " + ec.message());
  GS_ASSIGN_OR_RETURN(dir.log_dir_fd, OpenDirectory(dir.log_dir));
  return dir;
}

StatusOr<std::string> RealAgentEnv::ReadClusterId(const std::string& data_dir) {
  return ClusterIdentity(data_dir).Read();
}

Status RealAgentEnv::RecordClusterId(const std::string& data_dir, const std::string& id) {
  return ClusterIdentity(data_dir).Record(id);
}

StatusOr<int> RealAgentEnv::ArchiveTaskFiles(const std::string& data_dir,
                                             const std::string& old_id) {
  return ClusterIdentity(data_dir).ArchiveTaskFiles(old_id);
}

int RealAgentEnv::RemoveOldTaskFiles(int log_dir_fd, TimeMs ended_before_ms,
                                     const std::set<TaskKey>& keep) {
  return agent::RemoveOldTaskFiles(log_dir_fd, ended_before_ms, keep);
}

}  // namespace gpusched::agent
