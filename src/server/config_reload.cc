#include "server/config_reload.h"

#include <yaml-cpp/yaml.h>

namespace gpusched::server {

const std::set<std::string>& LiveConfigKeys() {
  static const std::set<std::string> keys = {"t1",           "t2",
                                             "node_timeout", "node_lost_after",
                                             "task_timeout", "max_placement_failures"};
  return keys;
}

StatusOr<std::map<std::string, std::string>> ConfigFileKeys(const std::string& path) {
  std::map<std::string, std::string> out;
  try {
    const YAML::Node root = YAML::LoadFile(path);
    if (root.IsNull()) return out;
    if (!root.IsMap()) {
      return InvalidArgument("config " + path + ": expected a mapping of options");
    }
    for (const auto& kv : root) {
      if (!kv.first.IsScalar()) continue;  // ApplyConfigFile names this error
      YAML::Emitter text;
      text << kv.second;
      out[kv.first.as<std::string>()] = text.c_str();
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument("config " + path + ": " + e.what());
  }
  return out;
}

StatusOr<ConfigReloader> ConfigReloader::Open(const std::string& path,
                                              const ServerConfig& running) {
  GS_ASSIGN_OR_RETURN(auto keys, ConfigFileKeys(path));
  return ConfigReloader(path, running, std::move(keys));
}

StatusOr<ConfigReload> ConfigReloader::Plan() const {
  ConfigReload r;
  r.file = path_;
  ServerConfig read = running_;
  GS_RETURN_IF_ERROR(ApplyConfigFile(path_, read));  // parses and validates the whole file
  GS_ASSIGN_OR_RETURN(auto keys, ConfigFileKeys(path_));
  std::set<std::string> changed;
  for (const auto& [key, text] : keys) {
    if (auto was = keys_.find(key); was == keys_.end() || was->second != text) changed.insert(key);
  }
  for (const auto& [key, text] : keys_) {
    if (keys.count(key) == 0) changed.insert(key);  // removed: its default needs a restart
  }
  for (const std::string& key : changed) {
    const bool live = LiveConfigKeys().count(key) > 0 && keys.count(key) > 0;
    (live ? r.applied : r.needs_restart).push_back(key);
  }
  // Only the live keys move; the running values of every other key stay.
  r.next = running_;
  r.next.scheduler.TakeLiveFields(read.scheduler);
  GS_RETURN_IF_ERROR(r.next.Validate());
  return r;
}

void ConfigReloader::Accept(const ConfigReload& reload) {
  running_ = reload.next;
  auto keys = ConfigFileKeys(path_);
  if (!keys.ok()) return;
  for (const std::string& key : reload.applied) keys_[key] = (*keys)[key];
}

}  // namespace gpusched::server
