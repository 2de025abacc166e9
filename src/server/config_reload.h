#pragma once
// ConfigReloader: `gpusched admin reload` and SIGHUP (issue 39). Reads the server's config
// file again, validates it whole, and sorts the keys whose value changed since the server
// read it into those a running server applies (LiveConfigKeys) and those that need a restart.
// A file that does not parse or validate changes nothing; the error names the file, the key
// and the value (ApplyConfigFile's errors).
//
// Live keys are the scheduler's timings and limits that it reads afresh at each pass or
// liveness check (core::Scheduler::ApplyLiveConfig). Everything else is read once at start
// (listen addresses, store, TLS and auth, heartbeat periods agents were told at registration,
// queue order, placement orders, ...) and is reported under needs_restart until the server
// restarts. A key removed from the file is reported under needs_restart too: its default
// returns with the next start. Keys are compared as the YAML text of their values.
//
// Thread-safety: none; the ControlPlane serialises reloads.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "server/server_config.h"

namespace gpusched::server {

// The config keys a running server applies on reload.
const std::set<std::string>& LiveConfigKeys();

struct ConfigReload {
  std::string file;
  std::vector<std::string> applied;        // live keys whose value changed, by name
  std::vector<std::string> needs_restart;  // other changed (or removed) keys, by name
  ServerConfig next;                       // the running config with the live keys applied
};

class ConfigReloader {
 public:
  // Reads `path` as the baseline: the values the server runs with. `running`: the config
  // the server started with (flags and that file).
  static StatusOr<ConfigReloader> Open(const std::string& path, const ServerConfig& running);

  // Reads the file again over the running config. Changes nothing here: Accept does.
  StatusOr<ConfigReload> Plan() const;
  // The reload was applied: its live values are the running ones from now on (restart-only
  // keys keep their start values, so they are reported again until a restart).
  void Accept(const ConfigReload& reload);

 private:
  ConfigReloader(std::string path, ServerConfig running, std::map<std::string, std::string> keys)
      : path_(std::move(path)), running_(std::move(running)), keys_(std::move(keys)) {}

  std::string path_;
  ServerConfig running_;
  std::map<std::string, std::string> keys_;  // key -> YAML text of its value, as running
};

// The top-level keys of a YAML config file, each with its value's YAML text.
StatusOr<std::map<std::string, std::string>> ConfigFileKeys(const std::string& path);

}  // namespace gpusched::server
