#include "server/server_config.h"

#include <pwd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/units.h"
#include "core/task_validation.h"
#include "rpc/tls.h"
#include "server/tokens.h"
#include "spec/spec_yaml.h"
#include "store/etcd_client.h"

namespace gpusched::server {

namespace {

// default_user: a name a task can run as, and not a uid-0 account of this machine.
Status CheckDefaultUser(const std::string& user) {
  GS_RETURN_IF_ERROR(CheckPrincipalName(user, "default_user"));
  std::vector<char> buf(16 * 1024);
  passwd pw{};
  passwd* found = nullptr;
  getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
  if (found != nullptr && pw.pw_uid == 0) {
    return InvalidArgument("default_user: \"" + user + "\" is uid 0 on this machine: tasks "
                           "whose submitter is unproven must not run as root");
  }
  return Status::Ok();
}

}  // namespace

core::SchedulerConfig ServerConfig::DefaultSchedulerConfig() { return core::SchedulerConfig(); }

namespace {

// Every period and duration: positive where it must be, bounded, heartbeats within timeouts.
Status ValidatePeriods(const ServerConfig& c) {
  for (auto [name, v] : {std::pair{"node_heartbeat", c.node_heartbeat_ms},
                         {"task_heartbeat", c.task_heartbeat_ms},
                         {"probe_interval", c.probe_interval_ms},
                         {"probe_timeout", c.probe_timeout_ms},
                         {"loop_tick", c.loop_tick_ms}}) {
    if (v <= 0) return InvalidArgument(std::string(name) + ": must be > 0");
  }
  // Issue 40: at most a year (a task's own grace has the same bound); above 24.8 days the
  // agent's wait once wrapped and the kill never came.
  if (c.kill_grace_ms < 0 || c.kill_grace_ms > core::kMaxDurationMs) {
    return InvalidArgument("kill_grace: " + FormatDurationMs(c.kill_grace_ms) +
                           " must be from 0 to " + FormatDurationMs(core::kMaxDurationMs));
  }
  if (c.retain_finished < 0) {
    return InvalidArgument("retain_finished: " + std::to_string(c.retain_finished) +
                           " must be >= 0");
  }
  if (c.retain_finished_ms < 0) return InvalidArgument("retain_finished_for: must be >= 0");
  if (c.history_retention_ms < 0 || c.history_retention_ms > 100 * core::kMaxDurationMs) {
    return InvalidArgument("history_retention: " + FormatDurationMs(c.history_retention_ms) +
                           " must be from 0 (keep every task) to " +
                           FormatDurationMs(100 * core::kMaxDurationMs));
  }
  if (c.store_retry_max_ms <= 0) return InvalidArgument("store_retry_max: must be > 0");
  if (c.idle_after_ms < 0) return InvalidArgument("idle_after: must be >= 0 (0 = off)");
  if (c.node_heartbeat_ms >= c.scheduler.node_timeout_ms) {
    return InvalidArgument("node_heartbeat: " + FormatDurationMs(c.node_heartbeat_ms) +
                           " must be shorter than node_timeout " +
                           FormatDurationMs(c.scheduler.node_timeout_ms));
  }
  if (c.task_heartbeat_ms >= c.scheduler.task_timeout_ms) {
    return InvalidArgument("task_heartbeat: " + FormatDurationMs(c.task_heartbeat_ms) +
                           " must be shorter than task_timeout " +
                           FormatDurationMs(c.scheduler.task_timeout_ms));
  }
  return Status::Ok();
}

// The limits on what the server takes: filter threads, the HTTP door, open streams.
Status ValidateLimits(const ServerConfig& c) {
  if (c.filter_workers < 0 || c.filter_workers > 1024) {
    return InvalidArgument("filter_workers: " + std::to_string(c.filter_workers) +
                           " must be from 0 (one per core) to 1024");
  }
  for (auto [name, v] : {std::pair{"http_max_body", c.http_max_body},
                         {"http_header_timeout", c.http_header_timeout_ms},
                         {"http_max_connections", c.http_max_connections},
                         {"stream_limit", c.stream_limit},
                         {"stream_limit_per_user", c.stream_limit_per_user}}) {
    if (v <= 0) return InvalidArgument(std::string(name) + ": must be > 0");
  }
  return Status::Ok();
}

// Issue 38: etcd holds every task's environment and the tokens' hashes: a plaintext endpoint
// off loopback needs `insecure`, and the TLS and user settings must be whole.
Status CheckEtcdTrust(const ServerConfig& c) {
  GS_ASSIGN_OR_RETURN(const std::vector<std::string> urls,
                      store::ParseEtcdEndpoints(c.etcd, "etcd"));
  for (const std::string& url : urls) {
    if (url.rfind("http://", 0) == 0 && !store::EtcdEndpointIsLoopback(url) && !c.insecure) {
      return FailedPrecondition(
          "etcd: \"" + url + "\" is plaintext off loopback: whoever reaches it reads every "
          "task's environment and can plant an admin token. Use https:// with --etcd-ca, "
          "--etcd-cert and --etcd-key (config etcd_ca, etcd_cert, etcd_key), or pass "
          "--insecure (config insecure: true) on a network you trust");
    }
  }
  if (c.etcd_cert.empty() != c.etcd_key.empty()) {
    return InvalidArgument(std::string(c.etcd_cert.empty() ? "etcd_cert" : "etcd_key") +
                           ": missing; a client certificate needs both etcd_cert and etcd_key");
  }
  if (c.etcd_max_txn_ops < 16) {
    return InvalidArgument("etcd_max_txn_ops: " + std::to_string(c.etcd_max_txn_ops) +
                           " is below 16 (etcd's default --max-txn-ops is 128)");
  }
  if (c.etcd_max_request_bytes < 64 * 1024) {
    return InvalidArgument("etcd_max_request_bytes: " + std::to_string(c.etcd_max_request_bytes) +
                           " is below 64 KiB (etcd's default --max-request-bytes is 1.5 MiB)");
  }
  if (c.etcd_user.empty() != c.etcd_password_file.empty()) {
    return InvalidArgument(std::string(c.etcd_user.empty() ? "etcd_user" : "etcd_password_file") +
                           ": missing; etcd authentication needs both etcd_user and "
                           "etcd_password_file");
  }
  return Status::Ok();
}

// Who calls (auth, default_user), the logs, and the store with its etcd endpoints and lease.
Status ValidateIdentityAndStore(const ServerConfig& c) {
  if (!c.auth.empty() && c.auth != "token" && c.auth != "none") {
    return InvalidArgument("auth: \"" + c.auth + "\" (use token or none)");
  }
  GS_RETURN_IF_ERROR(CheckDefaultUser(c.default_user));
  if (!c.log_level.empty()) {
    GS_RETURN_IF_ERROR(logging::ParseLevel(c.log_level, "log_level").status());
  }
  if (!c.log_format.empty()) {
    GS_RETURN_IF_ERROR(logging::ParseFormat(c.log_format, "log_format").status());
  }
  if (c.store != "sqlite" && c.store != "etcd") {
    return InvalidArgument("store: \"" + c.store + "\" (use sqlite or etcd)");
  }
  if (c.store == "etcd") {
    if (c.etcd.empty()) return InvalidArgument("etcd: --store etcd needs --etcd URL[,URL...]");
    GS_RETURN_IF_ERROR(store::ParseEtcdEndpoints(c.etcd, "etcd").status());
    if (c.etcd_prefix.empty() || c.etcd_prefix[0] != '/' || c.etcd_prefix.back() == '/') {
      return InvalidArgument("etcd_prefix: \"" + c.etcd_prefix +
                             "\" must start with '/' and not end with one");
    }
    GS_RETURN_IF_ERROR(CheckEtcdTrust(c));
  }
  // etcd's leases are whole seconds, at least 1.5 x its election timeout (2 s by default).
  if (c.lease_ttl_ms < 2'000 || c.lease_ttl_ms % 1'000 != 0) {
    return InvalidArgument("lease_ttl: " + FormatDurationMs(c.lease_ttl_ms) +
                           " must be whole seconds, at least 2s (etcd's minimum lease)");
  }
  return Status::Ok();
}

}  // namespace

Status ServerConfig::Validate() const {
  GS_RETURN_IF_ERROR(scheduler.Validate());
  GS_RETURN_IF_ERROR(ValidatePeriods(*this));
  GS_RETURN_IF_ERROR(ValidateLimits(*this));
  return ValidateIdentityAndStore(*this);
}

size_t ServerConfig::FilterWorkers() const {
  if (filter_workers > 0) return static_cast<size_t>(filter_workers);
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::min(cores, std::max<size_t>(1, scheduler.placement.parallel_chunks));
}

// Token authentication unless both `listen` and `http` are loopback (rpc::IsLoopbackHost:
// 127.0.0.0/8, ::1, "localhost"); 0.0.0.0 and [::] can be reached from other machines.
bool ServerConfig::AuthEnabled() const {
  if (!auth.empty()) return auth == "token";
  const bool http_loopback = http.empty() || rpc::IsLoopbackHost(rpc::HostOf(http));
  return !(rpc::IsLoopbackHost(rpc::HostOf(listen)) && http_loopback);
}

namespace {

// One key of one value: `apply` parses a value into the config; `show` says what the config
// holds now, one canonical text per stored value (IsServerConfigDefault compares through it).
struct Setter {
  std::function<Status(const std::string& value, const std::string& field)> apply;
  std::function<std::string()> show;
  Status operator()(const std::string& value, const std::string& field) const {
    return apply(value, field);
  }
};

template <typename T>
std::function<std::string()> Show(const T& out) {
  return [&out] {
    std::ostringstream text;
    text << out;
    return text.str();
  };
}

Setter Duration(DurationMs& out) {
  return {[&out](const std::string& v, const std::string& f) -> Status {
            GS_ASSIGN_OR_RETURN(out, ParseDurationMs(v, f));
            return Status::Ok();
          },
          Show(out)};
}

Setter Integer(int64_t& out) {
  return {[&out](const std::string& v, const std::string& f) -> Status {
            try {
              size_t used = 0;
              out = std::stoll(v, &used);
              if (used == v.size()) return Status::Ok();
            } catch (const std::exception&) {  // stoll: not a number or out of range
            }
            return InvalidArgument(f + ": \"" + v + "\" is not an integer");
          },
          Show(out)};
}

Setter Bool(bool& out) {
  return {[&out](const std::string& v, const std::string& f) -> Status {
            if (v == "true" || v == "yes" || v == "on") {
              out = true;
            } else if (v == "false" || v == "no" || v == "off") {
              out = false;
            } else {
              return InvalidArgument(f + ": \"" + v + "\" (use true or false)");
            }
            return Status::Ok();
          },
          Show(out)};
}

Setter Number(double& out) {
  return {[&out](const std::string& v, const std::string& f) -> Status {
            try {
              size_t used = 0;
              out = std::stod(v, &used);
              if (used == v.size()) return Status::Ok();
            } catch (const std::exception&) {  // stod: not a number or out of range
            }
            return InvalidArgument(f + ": \"" + v + "\" is not a number");
          },
          Show(out)};
}

// A whole number >= `min` into a size_t.
Setter Count(size_t& out, size_t min) {
  return {[&out, min](const std::string& v, const std::string& f) -> Status {
            int64_t n = 0;
            GS_RETURN_IF_ERROR(Integer(n)(v, f));
            if (n < static_cast<int64_t>(min)) {
              return InvalidArgument(f + ": \"" + v + "\" must be >= " + std::to_string(min));
            }
            out = static_cast<size_t>(n);
            return Status::Ok();
          },
          Show(out)};
}

// A whole number in [min, max] (CN115981827A's counters: PATENTS.md section 6). With
// `unlimited`, the word "unlimited" stores INT64_MAX.
Setter InRange(int64_t& out, int64_t min, int64_t max, bool unlimited = false) {
  return {[&out, min, max, unlimited](const std::string& v, const std::string& f) -> Status {
            if (unlimited && v == "unlimited") {
              out = std::numeric_limits<int64_t>::max();
              return Status::Ok();
            }
            int64_t n = 0;
            if (!Integer(n)(v, f).ok() || n < min || n > max) {
              return InvalidArgument(f + ": \"" + v + "\" must be a whole number from " +
                                     std::to_string(min) + " to " + std::to_string(max) +
                                     (unlimited ? ", or unlimited" : ""));
            }
            out = n;
            return Status::Ok();
          },
          Show(out)};
}

// A whole number of bytes, or a size with a unit ("1MiB", "2GiB"; base/units.h).
Setter Bytes(int64_t& out) {
  return {[&out](const std::string& v, const std::string& f) -> Status {
            if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos) {
              return Integer(out)(v, f);
            }
            StatusOr<MiB> mib = ParseSizeMiB(v, f);
            if (!mib.ok()) return mib.status();
            out = *mib * (int64_t{1} << 20);
            return Status::Ok();
          },
          Show(out)};
}

Setter Text(std::string& out) {
  return {[&out](const std::string& v, const std::string&) -> Status {
            out = v;
            return Status::Ok();
          },
          Show(out)};
}

// One of a fixed set of names; the error lists them ("use a, b or c").
template <typename T>
Setter Choice(T& out, std::vector<std::pair<std::string, T>> names) {
  auto apply = [&out, names](const std::string& v, const std::string& f) -> Status {
    std::string list;
    for (size_t i = 0; i < names.size(); ++i) {
      if (v == names[i].first) {
        out = names[i].second;
        return Status::Ok();
      }
      list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i].first;
    }
    return InvalidArgument(f + ": \"" + v + "\" (use " + list + ")");
  };
  auto show = [&out, names] {
    for (const auto& [name, value] : names) {
      if (value == out) return name;
    }
    return std::string("?");
  };
  return {std::move(apply), std::move(show)};
}

}  // namespace

Status CheckExposure(const ServerConfig& c, bool* warn) {
  *warn = false;
  std::string exposed;  // the first address reachable from other machines
  for (const auto& [field, address] : {std::pair{"listen", c.listen}, {"http", c.http}}) {
    if (!address.empty() && !rpc::IsLoopbackHost(rpc::HostOf(address))) {
      exposed = std::string(field) + " " + address;
      break;
    }
  }
  if (exposed.empty()) return Status::Ok();
  const bool protected_ = !c.tls_dir.empty() && c.AuthEnabled();
  if (protected_) return Status::Ok();
  if (c.insecure) {
    *warn = true;
    return Status::Ok();
  }
  return FailedPrecondition(
      exposed + " is reachable from other machines, but the server runs without " +
      (c.tls_dir.empty() ? std::string("TLS") : std::string("authentication")) +
      ": anyone who reaches it could run any command on every node. Create certificates "
      "with `gpusched certs init DIR --server-host HOST --agent NODE...` and start with "
      "--tls-dir DIR (config tls_dir), or listen on 127.0.0.1, or pass --insecure (config "
      "insecure: true) on a network you trust");
}

namespace {

// `memory_table:` names a file (relative to the config file) or is the table itself, which is
// checked now so that a bad row stops the start with its line.
Status ApplyMemoryTable(const YAML::Node& value, const std::string& path, ServerConfig& c) {
  const std::string field = "config " + path + ": memory_table";
  if (value.IsScalar()) {
    const std::filesystem::path file = value.as<std::string>();
    if (file.empty()) return InvalidArgument(field + ": empty file name");
    c.memory_table = file.is_absolute()
                         ? file.string()
                         : (std::filesystem::path(path).parent_path() / file).string();
    return Status::Ok();
  }
  if (!value.IsMap()) {
    return InvalidArgument(field + ": expected a file name or a table (rows:, formulas:)");
  }
  c.memory_table_yaml = YAML::Dump(value);
  core::GpuMemoryTable scratch;
  return spec::LoadMemoryTableYaml(c.memory_table_yaml, field, &scratch);
}

// The scorers' config keys (core::kScorers), "a, b, c<last>d".
std::string ScorerKeys(const char* last) {
  std::string keys;
  for (size_t i = 0; i < core::kScorers.size(); ++i) {
    if (i > 0) keys += i + 1 == core::kScorers.size() ? last : ", ";
    keys += core::kScorers[i].config_key;
  }
  return keys;
}

// CN109992422A claim 4 / CN115981827A k8s_select: `score_weights:` is a mapping from scorer
// (core/scorers.h, kScorers' config keys) to weight >= 0. It replaces the whole set: a scorer
// not named weighs 0.
Status ApplyScoreWeights(const YAML::Node& value, const std::string& path, ServerConfig& c) {
  const std::string field = "config " + path + ": score_weights";
  if (!value.IsMap() || value.size() == 0) {
    return InvalidArgument(field + ": expected a mapping of scorer: weight (" + ScorerKeys(", ") +
                           ")");
  }
  core::ScoreWeights w;
  w.weight.fill(0);
  for (const auto& kv : value) {
    if (!kv.first.IsScalar() || !kv.second.IsScalar()) {
      return InvalidArgument(field + ": expected scorer: weight pairs");
    }
    const std::string name = kv.first.as<std::string>();
    const auto it = std::find_if(core::kScorers.begin(), core::kScorers.end(),
                                  [&](const core::ScorerDef& s) { return name == s.config_key; });
    if (it == core::kScorers.end()) {
      return InvalidArgument(field + ": unknown scorer \"" + name + "\" (use " +
                             ScorerKeys(" or ") + ")");
    }
    const std::string text = kv.second.as<std::string>();
    double& out = w.weight[static_cast<size_t>(it->id)];
    GS_RETURN_IF_ERROR(Number(out)(text, field + "." + name));
    if (!std::isfinite(out) || out < 0 || out > 1e6) {
      return InvalidArgument(field + "." + name + ": \"" + text +
                             "\" must be a number from 0 to 1e6");
    }
  }
  if (std::all_of(w.weight.begin(), w.weight.end(), [](double x) { return x == 0; })) {
    return InvalidArgument(field + ": every weight is 0 (every node would score the same); "
                                   "give at least one scorer a weight > 0");
  }
  c.scheduler.placement.weights = w;
  return Status::Ok();
}

// priority_grants: {TEAM: CLASS, ...}: the highest class each team may submit (issue 36;
// a team's own `quota set --max-priority` comes first). Classes are checked by Validate.
Status ApplyPriorityGrants(const YAML::Node& node, const std::string& path, ServerConfig& c) {
  const std::string field = "config " + path + ": priority_grants";
  if (!node.IsMap()) {
    return InvalidArgument(field + ": expected a mapping of team: class, e.g. {vision: high}");
  }
  std::map<std::string, std::string> grants;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar() || !kv.second.IsScalar()) {
      return InvalidArgument(field + ": each entry is TEAM: CLASS");
    }
    grants[kv.first.as<std::string>()] = kv.second.as<std::string>();
  }
  c.scheduler.priority_grants.teams = std::move(grants);
  return Status::Ok();
}

// priority_classes: {NAME: VALUE, ...} replaces the built-in high/normal/low.
Status ApplyPriorityClasses(const YAML::Node& node, const std::string& path, ServerConfig& c) {
  const std::string field = "config " + path + ": priority_classes";
  if (!node.IsMap() || node.size() == 0) {
    return InvalidArgument(field + ": expected a mapping of class name: integer value, e.g. "
                                   "{urgent: 2000, high: 1000, normal: 0, low: -1000}");
  }
  std::vector<core::SchedulerConfig::PriorityClass> classes;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar() || !kv.second.IsScalar()) {
      return InvalidArgument(field + ": each entry is NAME: integer");
    }
    const std::string name = kv.first.as<std::string>();
    const std::string text = kv.second.as<std::string>();
    int64_t value = 0;
    try {
      size_t used = 0;
      value = std::stoll(text, &used);
      if (used != text.size()) throw std::invalid_argument(text);
    } catch (const std::exception&) {  // stoll: not an integer
      return InvalidArgument(field + "." + name + ": \"" + text + "\" is not an integer");
    }
    classes.push_back({name, value});
  }
  c.scheduler.priority_classes = std::move(classes);
  return Status::Ok();
}

// las_thresholds / dlas_thresholds (issue 37): GPU-time durations, ascending, as a YAML list
// ([1h, 10h]) or one comma-separated value ("1h,10h"); GPU-time = GPUs x run time.
Status ApplyThresholds(const YAML::Node& value, const std::string& path, const std::string& key,
                       std::vector<int64_t>& out) {
  const std::string field = "config " + path + ": " + key;
  std::vector<std::string> items;
  if (value.IsSequence()) {
    for (const auto& item : value) {
      if (!item.IsScalar()) return InvalidArgument(field + ": expected a list of durations");
      items.push_back(item.as<std::string>());
    }
  } else if (value.IsScalar()) {
    std::stringstream in(value.as<std::string>());
    for (std::string item; std::getline(in, item, ',');) {
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      items.push_back(item);
    }
  }
  if (items.empty()) {
    return InvalidArgument(field + ": expected GPU-time durations, ascending, e.g. [1h, 10h]");
  }
  std::vector<int64_t> th;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    GS_ASSIGN_OR_RETURN(const DurationMs ms, ParseDurationMs(items[i], f));
    if (ms <= 0 || (!th.empty() && ms <= th.back())) {
      return InvalidArgument(f + ": \"" + items[i] + "\" must be > 0 and above the one before");
    }
    th.push_back(ms);
  }
  out = std::move(th);
  return Status::Ok();
}

// The server's own keys: its periods, store, doors, identity and logs.
std::map<std::string, Setter> ServerKeys(ServerConfig& c) {
  return {
      {"node_heartbeat", Duration(c.node_heartbeat_ms)},
      {"task_heartbeat", Duration(c.task_heartbeat_ms)},
      {"probe_interval", Duration(c.probe_interval_ms)},
      {"probe_timeout", Duration(c.probe_timeout_ms)},
      {"kill_grace", Duration(c.kill_grace_ms)},
      {"loop_tick", Duration(c.loop_tick_ms)},
      {"retain_finished", Integer(c.retain_finished)},
      {"retain_finished_for", Duration(c.retain_finished_ms)},
      {"history_retention", Duration(c.history_retention_ms)},
      {"store_retry_max", Duration(c.store_retry_max_ms)},
      {"sqlite_synchronous",
       Choice<bool>(c.fsync_every_commit, {{"full", true}, {"normal", false}})},
      {"store", Text(c.store)},
      {"etcd", Text(c.etcd)},
      {"etcd_prefix", Text(c.etcd_prefix)},
      {"etcd_ca", Text(c.etcd_ca)},
      {"etcd_cert", Text(c.etcd_cert)},
      {"etcd_key", Text(c.etcd_key)},
      {"etcd_user", Text(c.etcd_user)},
      {"etcd_password_file", Text(c.etcd_password_file)},
      {"etcd_max_txn_ops", Integer(c.etcd_max_txn_ops)},
      {"etcd_max_request_bytes", Bytes(c.etcd_max_request_bytes)},
      {"lease_ttl", Duration(c.lease_ttl_ms)},
      {"idle_after", Duration(c.idle_after_ms)},
      {"tls_dir", Text(c.tls_dir)},
      {"auth", Text(c.auth)},
      {"insecure", Bool(c.insecure)},
      {"allow_root_tasks", Bool(c.allow_root_tasks)},
      {"private_data", Bool(c.private_data)},
      {"default_user", Text(c.default_user)},
      {"log_level", Text(c.log_level)},
      {"log_format", Text(c.log_format)},
      {"learn_task_written_peaks", Bool(c.learn_task_written_peaks)},
      {"idle_action", Choice<bool>(c.idle_stop, {{"flag", false}, {"stop", true}})},
      {"filter_workers", Integer(c.filter_workers)},
      // The doors (issue 36; docs/auth.md "Limits at the doors").
      {"http_max_body", Bytes(c.http_max_body)},
      {"http_header_timeout", Duration(c.http_header_timeout_ms)},
      {"http_max_connections", Integer(c.http_max_connections)},
      {"http_hosts", Text(c.http_hosts)},
      {"stream_limit", Integer(c.stream_limit)},
      {"stream_limit_per_user", Integer(c.stream_limit_per_user)},
  };
}

// Where tasks go: node and GPU order, fragmentation, the parallel node filter.
std::map<std::string, Setter> PlacementKeys(core::PlacementOptions& p) {
  return {
      // CN109992422A claim 4: node order and GPU order (core/placement.h).
      {"node_order",
       Choice<core::NodeOrder>(p.node_order,
                               {{"weighted_score", core::NodeOrder::kWeightedScore},
                                {"load_balance", core::NodeOrder::kLoadBalance},
                                {"min_fragmentation", core::NodeOrder::kMinFragmentation}})},
      {"gpu_order", Choice<core::GpuOrder>(
                        p.gpu_order, {{"spread", core::GpuOrder::kSpread},
                                      {"best_fit", core::GpuOrder::kBestFit},
                                      {"min_fragmentation", core::GpuOrder::kMinFragmentation}})},
      {"fragmentation_measure",
       Choice<core::FragmentationMeasure>(p.fragmentation,
                                          {{"packing", core::FragmentationMeasure::kPacking},
                                           {"next_task", core::FragmentationMeasure::kNextTask}})},
      {"use_reported_free", Bool(p.filter.use_reported_free)},
      // CN115981827A claim 1: the parallel node filter.
      {"parallel_threshold", Count(p.parallel_threshold, 0)},
      {"parallel_chunks", Count(p.parallel_chunks, 1)},
      // Issue 43: weighted-score decisions through the node index (false: scan every node).
      {"node_index", Bool(p.index)},
      {"node_index_min_nodes", Count(p.index_min_nodes, 0)},
  };
}

// The scheduler's keys (core/scheduler_config.h).
std::map<std::string, Setter> SchedulerKeys(core::SchedulerConfig& s, int64_t& priority_cap) {
  return {
      {"t1", Duration(s.t1_ms)},
      {"t2", Duration(s.t2_ms)},
      {"fail_max", Integer(s.fail_max)},
      // Issue 41: the same setting in users' words (retries of a task that does not say).
      {"default_retries", Integer(s.fail_max)},
      // PATENTS.md section 6: the demotion cap (default 5 + fail_max; a new task's Pt is 1-5)
      // and the passes without a fitting node before a task is given up (default unlimited).
      {"max_priority_value", InRange(priority_cap, 5, 1'000'000)},
      {"max_placement_failures",
       InRange(s.max_placement_failures, 1, std::numeric_limits<int64_t>::max() - 1, true)},
      {"node_timeout", Duration(s.node_timeout_ms)},
      {"node_lost_after", Duration(s.node_lost_after_ms)},
      {"task_timeout", Duration(s.task_timeout_ms)},
      {"fair_share_weight", Number(s.fair_share.fair_share_weight)},
      {"priority_weight", Number(s.fair_share.priority_weight)},
      {"fair_share_half_life", Duration(s.fair_share.half_life_ms)},
      {"fair_share_recalc", Duration(s.fair_share.recalc_ms)},
      {"reclaim_borrowed", Bool(s.reclaim_borrowed)},
      // Gangs and priority preemption (issue 13; core/README.md).
      {"gang_reservation", Bool(s.gang_reservation)},
      // Issue 37: backfill with reservations for tasks of more than one GPU.
      {"wide_task_reservation", Bool(s.wide_task_reservation)},
      {"gang_timeout", Duration(s.gang_timeout_ms)},
      {"priority_preemption", Bool(s.priority_preemption)},
      {"preemption_grace", Duration(s.preemption_grace_ms)},
      {"default_priority_class", Text(s.default_priority_class)},
      {"default_max_priority", Text(s.priority_grants.default_max)},
      // Production queue orders (issue 37; core/queue_order.h), as `sim --policy`.
      {"queue_order", Choice<core::QueueOrder>(s.queue_order.order,
                                               {{"priority", core::QueueOrder::kPriority},
                                                {"fifo", core::QueueOrder::kSubmission},
                                                {"sjf", core::QueueOrder::kShortestDuration},
                                                {"srtf", core::QueueOrder::kShortestRemaining},
                                                {"las", core::QueueOrder::kLeastAttained},
                                                {"dlas", core::QueueOrder::kTwoDimLas}})},
      {"dlas_promote_knob", Number(s.queue_order.dlas_promote_knob)},
      {"order_quantum", Duration(s.queue_order.quantum_ms)},
      {"head_of_line_blocking", Bool(s.head_of_line_blocking)},
      {"capacity_wait",
       Choice<core::CapacityWait>(s.capacity_wait,
                                  {{"stay_queued", core::CapacityWait::kStayQueued},
                                   {"failure_queue", core::CapacityWait::kFailureQueue}})},
  };
}

// Every key of one value (docs/server-config.md lists each), bound to `c`; `priority_cap`
// receives max_priority_value (0 = not given: 5 + fail_max).
std::map<std::string, Setter> ScalarKeys(ServerConfig& c, int64_t& priority_cap) {
  std::map<std::string, Setter> keys = ServerKeys(c);
  keys.merge(SchedulerKeys(c.scheduler, priority_cap));
  keys.merge(PlacementKeys(c.scheduler.placement));
  return keys;
}

// Keys whose value is a mapping or a list, each read by its own function in ApplyConfigFile.
constexpr std::array<std::string_view, 6> kStructuredKeys = {
    "memory_table", "priority_classes", "priority_grants", "score_weights", "las_thresholds",
    "dlas_thresholds"};

}  // namespace

std::vector<std::string> ServerConfigKeys() {
  ServerConfig scratch;
  int64_t cap = 0;
  std::vector<std::string> out(kStructuredKeys.begin(), kStructuredKeys.end());
  for (const auto& [key, setter] : ScalarKeys(scratch, cap)) out.push_back(key);
  return out;
}

StatusOr<bool> IsServerConfigDefault(const std::string& key, const std::string& value) {
  ServerConfig defaults, given;
  int64_t cap_default = 0, cap_given = 0;
  const auto default_keys = ScalarKeys(defaults, cap_default);
  const auto given_keys = ScalarKeys(given, cap_given);
  const auto it = given_keys.find(key);
  if (it == given_keys.end()) return NotFound(key + ": not a server key of one value");
  GS_RETURN_IF_ERROR(it->second(value, key));
  return it->second.show() == default_keys.at(key).show();
}

namespace {

// A key that takes a mapping or a list (kStructuredKeys), read by its own function; nullopt
// for every other key.
std::optional<Status> ApplyStructuredKey(const std::string& key, const YAML::Node& value,
                                         const std::string& path, ServerConfig& c) {
  core::QueueOrderOptions& order = c.scheduler.queue_order;
  if (key == "memory_table") return ApplyMemoryTable(value, path, c);
  if (key == "score_weights") return ApplyScoreWeights(value, path, c);
  if (key == "priority_classes") return ApplyPriorityClasses(value, path, c);
  if (key == "priority_grants") return ApplyPriorityGrants(value, path, c);
  if (key == "las_thresholds") {
    return ApplyThresholds(value, path, key, order.las_thresholds_gpu_ms);
  }
  if (key == "dlas_thresholds") {
    return ApplyThresholds(value, path, key, order.dlas_thresholds_gpu_ms);
  }
  return std::nullopt;
}

// YAML forbids a key twice; default_retries is fail_max in users' words: one of the two.
Status CheckGivenOnce(std::map<std::string, int>& seen, const std::string& key, int line,
                      const std::string& path) {
  const std::string setting = key == "default_retries" ? "fail_max" : key;
  auto [first, fresh] = seen.try_emplace(setting, line);
  if (fresh) return Status::Ok();
  return InvalidArgument("config " + path + ":" + std::to_string(line) + ": " + key +
                         " given twice (first on line " + std::to_string(first->second) +
                         (setting != key || key == "fail_max" ? "; default_retries and "
                                                                "fail_max are one setting)"
                                                              : ")"));
}

Status UnknownKey(const std::string& key, const std::map<std::string, Setter>& keys,
                  const std::string& path) {
  std::string known;
  for (std::string_view name : kStructuredKeys) known += std::string(name) + ", ";
  for (const auto& [name, apply] : keys) known += name + ", ";
  known.resize(known.size() - 2);
  return InvalidArgument("config " + path + ": unknown key \"" + key + "\" (known: " + known +
                         ")");
}

// What follows from the keys read (`seen`): the demotion cap, the baselines' capacity wait,
// the 2D-LAS knob's range.
Status FinishConfigFile(const std::map<std::string, int>& seen, int64_t priority_cap,
                        const std::string& path, core::SchedulerConfig& s) {
  s.max_priority_value = static_cast<int>(priority_cap > 0 ? priority_cap : 5 + s.fail_max);
  // The baselines wait in Q for capacity, as `sim --policy` runs them (sim/policy.h): under
  // another order than CN115981827A's, FQ's t2 delay would only hold back what the order
  // chose. An explicit capacity_wait wins.
  if (s.queue_order.order != core::QueueOrder::kPriority && seen.count("capacity_wait") == 0) {
    s.capacity_wait = core::CapacityWait::kStayQueued;
  }
  if (!std::isfinite(s.queue_order.dlas_promote_knob) || s.queue_order.dlas_promote_knob < 0 ||
      s.queue_order.dlas_promote_knob > 1e6) {
    return InvalidArgument("config " + path + ": dlas_promote_knob: " +
                           std::to_string(s.queue_order.dlas_promote_knob) +
                           " must be a number from 0 to 1e6");
  }
  return Status::Ok();
}

}  // namespace

Status ApplyConfigFile(const std::string& path, ServerConfig& c) {
  int64_t priority_cap = 0;  // max_priority_value; 0 = not given: 5 + fail_max
  const std::map<std::string, Setter> keys = ScalarKeys(c, priority_cap);
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("config " + path + ": " + e.what());
  }
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap()) return InvalidArgument("config " + path + ": expected a mapping of options");
  std::map<std::string, int> seen;  // key -> its line
  for (const auto& kv : root) {
    // as<std::string>() throws on a key that is a list or a mapping.
    if (!kv.first.IsScalar()) {
      return InvalidArgument("config " + path + ":" + std::to_string(kv.first.Mark().line + 1) +
                             ": a key must be an option name");
    }
    const std::string key = kv.first.as<std::string>();
    GS_RETURN_IF_ERROR(CheckGivenOnce(seen, key, kv.first.Mark().line + 1, path));
    if (std::optional<Status> done = ApplyStructuredKey(key, kv.second, path, c)) {
      GS_RETURN_IF_ERROR(*done);
      continue;
    }
    auto it = keys.find(key);
    if (it == keys.end()) return UnknownKey(key, keys, path);
    if (!kv.second.IsScalar()) {
      return InvalidArgument("config " + path + ": " + key + ": expected a single value");
    }
    GS_RETURN_IF_ERROR(it->second(kv.second.as<std::string>(), "config " + path + ": " + key));
  }
  GS_RETURN_IF_ERROR(FinishConfigFile(seen, priority_cap, path, c.scheduler));
  return c.Validate();
}

}  // namespace gpusched::server
