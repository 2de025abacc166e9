#include "server/server_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <limits>

namespace gpusched::server {
namespace {

std::string WriteFile(const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("gpusched_cfg_" + std::to_string(getpid()) + ".yaml"))
                               .string();
  std::ofstream(path) << text;
  return path;
}

TEST(ServerConfigTest, DefaultsWaitForCapacityInTheFailureQueueAsSection6Says) {
  ServerConfig c;
  EXPECT_EQ(c.scheduler.capacity_wait, core::CapacityWait::kFailureQueue);
  EXPECT_TRUE(c.Validate().ok());
}

// Issue 39: acknowledged tasks survive power loss unless the operator chooses otherwise.
TEST(ServerConfigTest, Issue39_SqliteIsSynchronousFullByDefaultAndNormalOnRequest) {
  ServerConfig c;
  EXPECT_TRUE(c.fsync_every_commit);
  const std::string path = WriteFile("sqlite_synchronous: normal\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(c.fsync_every_commit);
  std::filesystem::remove(path);
}

TEST(ServerConfigTest, Issue39_LogKeysAreReadAndBadValuesNamed) {
  ServerConfig c;
  const std::string path = WriteFile("log_level: warn\nlog_format: json\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.log_level, "warn");
  EXPECT_EQ(c.log_format, "json");
  EXPECT_TRUE(c.Validate().ok());
  std::filesystem::remove(path);
  c.log_level = "loud";
  s = c.Validate();
  EXPECT_NE(s.message().find("log_level: \"loud\""), std::string::npos) << s.ToString();
  c.log_level = "";
  c.log_format = "xml";
  s = c.Validate();
  EXPECT_NE(s.message().find("log_format: \"xml\""), std::string::npos) << s.ToString();
}

TEST(ServerConfigTest, FileSetsEveryTiming) {
  ServerConfig c;
  const std::string path = WriteFile(
      "t1: 1s\nt2: 300ms\nfail_max: 2\nnode_timeout: 1500ms\ntask_timeout: 2s\n"
      "node_heartbeat: 200ms\ntask_heartbeat: 250ms\nprobe_interval: 500ms\n"
      "capacity_wait: stay_queued\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.scheduler.t1_ms, 1000);
  EXPECT_EQ(c.scheduler.t2_ms, 300);
  EXPECT_EQ(c.scheduler.fail_max, 2);
  EXPECT_EQ(c.scheduler.max_priority_value, 7);
  EXPECT_EQ(c.scheduler.node_timeout_ms, 1500);
  EXPECT_EQ(c.node_heartbeat_ms, 200);
  EXPECT_EQ(c.scheduler.capacity_wait, core::CapacityWait::kStayQueued);
  std::filesystem::remove(path);
}

TEST(ServerConfigTest, Issue13_PriorityClassesAndGangKeysAreRead) {
  ServerConfig c;
  const std::string path = WriteFile(
      "priority_classes: {urgent: 5000, batch: -10, normal: 0}\n"
      "default_priority_class: batch\npriority_preemption: false\npreemption_grace: 2m\n"
      "gang_reservation: false\ngang_timeout: 1h\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.scheduler.PriorityOf("urgent"), 5000);
  EXPECT_EQ(c.scheduler.PriorityOf(""), -10);  // the default class
  EXPECT_FALSE(c.scheduler.PriorityOf("high").has_value());  // replaced, not merged
  EXPECT_FALSE(c.scheduler.priority_preemption);
  EXPECT_EQ(c.scheduler.preemption_grace_ms, 120'000);
  EXPECT_FALSE(c.scheduler.gang_reservation);
  EXPECT_EQ(c.scheduler.gang_timeout_ms, 3'600'000);
  // A value that is not an integer, and a default that is not a class, are named.
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"priority_classes: {high: lots}\n",
            "priority_classes.high: \"lots\" is not an integer"},
           {"priority_classes: [high]\n", "priority_classes: expected a mapping"},
           {"default_priority_class: gold\n", "default_priority_class: \"gold\""}}) {
    ServerConfig bad;
    const std::string p = WriteFile(text);
    Status e = ApplyConfigFile(p, bad);
    EXPECT_FALSE(e.ok()) << text;
    EXPECT_NE(e.message().find(expected), std::string::npos) << e.ToString();
  }
  std::filesystem::remove(path);
}

// Issue 36: priority grants per team and the default grant; classes they name must exist.
TEST(ServerConfigTest, Issue36_PriorityGrantsAreReadAndChecked) {
  ServerConfig c;
  const std::string path = WriteFile(
      "priority_grants: {vision: high, batch: low}\ndefault_max_priority: low\n"
      "learn_task_written_peaks: true\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.scheduler.priority_grants.teams.at("vision"), "high");
  EXPECT_EQ(c.scheduler.priority_grants.default_max, "low");
  EXPECT_TRUE(c.learn_task_written_peaks);
  EXPECT_FALSE(ServerConfig().learn_task_written_peaks);
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"priority_grants: {vision: gold}\n",
            "priority_grants.vision: \"gold\" is not one of priority_classes"},
           {"priority_grants: [vision]\n", "priority_grants: expected a mapping"},
           {"default_max_priority: gold\n", "default_max_priority: \"gold\""}}) {
    ServerConfig bad;
    const std::string p = WriteFile(text);
    Status e = ApplyConfigFile(p, bad);
    EXPECT_FALSE(e.ok()) << text;
    EXPECT_NE(e.message().find(expected), std::string::npos) << e.ToString();
  }
  std::filesystem::remove(path);
}

// Issue 37: production queue orders, the keys `sim --config` reads as well.
TEST(ServerConfigTest, Issue37_QueueOrderKeysAreRead) {
  ServerConfig c;
  EXPECT_EQ(c.scheduler.queue_order.order, core::QueueOrder::kPriority);  // CN115981827A
  const std::string path = WriteFile(
      "queue_order: las\nlas_thresholds: [2s, 1h]\ndlas_thresholds: 3250s, 7200s\n"
      "order_quantum: 3s\ndlas_promote_knob: 2.5\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.scheduler.queue_order.order, core::QueueOrder::kLeastAttained);
  EXPECT_EQ(c.scheduler.queue_order.las_thresholds_gpu_ms, (std::vector<int64_t>{2000, 3'600'000}));
  EXPECT_EQ(c.scheduler.queue_order.dlas_thresholds_gpu_ms,
            (std::vector<int64_t>{3'250'000, 7'200'000}));
  EXPECT_EQ(c.scheduler.queue_order.quantum_ms, 3000);
  EXPECT_EQ(c.scheduler.queue_order.dlas_promote_knob, 2.5);
  // A baseline order waits in Q for capacity (as sim --policy) unless capacity_wait says.
  EXPECT_EQ(c.scheduler.capacity_wait, core::CapacityWait::kStayQueued);
  for (const auto& [name, order] : std::vector<std::pair<std::string, core::QueueOrder>>{
           {"priority", core::QueueOrder::kPriority}, {"fifo", core::QueueOrder::kSubmission},
           {"sjf", core::QueueOrder::kShortestDuration},
           {"srtf", core::QueueOrder::kShortestRemaining},
           {"dlas", core::QueueOrder::kTwoDimLas}}) {
    ServerConfig d;
    const std::string p = WriteFile("queue_order: " + name + "\ncapacity_wait: failure_queue\n");
    ASSERT_TRUE(ApplyConfigFile(p, d).ok()) << name;
    EXPECT_EQ(d.scheduler.queue_order.order, order) << name;
    EXPECT_EQ(d.scheduler.capacity_wait, core::CapacityWait::kFailureQueue) << name;
  }
  std::filesystem::remove(path);
}

// Issue 37, PATENTS.md section 6: the demotion cap and the give-up count are server options.
TEST(ServerConfigTest, Issue37_MaxPriorityValueAndMaxPlacementFailuresAreRead) {
  ServerConfig defaults;
  const std::string none = WriteFile("fail_max: 2\n");
  ASSERT_TRUE(ApplyConfigFile(none, defaults).ok());
  EXPECT_EQ(defaults.scheduler.max_priority_value, 7);  // 5 + FAIL_MAX when not given
  EXPECT_EQ(defaults.scheduler.max_placement_failures, std::numeric_limits<int64_t>::max());
  ServerConfig c;
  const std::string path = WriteFile("fail_max: 2\nmax_priority_value: 12\n"
                                     "max_placement_failures: 3\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.scheduler.max_priority_value, 12);  // given: fail_max does not override it
  EXPECT_EQ(c.scheduler.max_placement_failures, 3);
  ServerConfig u;
  const std::string unlimited = WriteFile("max_placement_failures: unlimited\n");
  ASSERT_TRUE(ApplyConfigFile(unlimited, u).ok());
  EXPECT_EQ(u.scheduler.max_placement_failures, std::numeric_limits<int64_t>::max());
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"max_priority_value: 4\n",
            "max_priority_value: \"4\" must be a whole number from 5 to 1000000"},
           {"max_priority_value: low\n", "max_priority_value: \"low\""},
           {"max_priority_value: unlimited\n", "max_priority_value: \"unlimited\""},
           {"max_placement_failures: 0\n",
            "max_placement_failures: \"0\" must be a whole number from 1 to "},
           {"max_placement_failures: -3\n", "max_placement_failures: \"-3\""},
           {"max_placement_failures: many\n", "max_placement_failures: \"many\""}}) {
    ServerConfig refused;
    const Status e = ApplyConfigFile(WriteFile(text), refused);
    EXPECT_NE(e.message().find(expected), std::string::npos) << text << ": " << e.ToString();
  }
  std::filesystem::remove(path);
}

TEST(ServerConfigTest, Issue37_BadQueueOrderKeysNameKeyAndValue) {
  for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
           {"queue_order: lifo\n",
            "queue_order: \"lifo\" (use priority, fifo, sjf, srtf, las or dlas)"},
           {"las_thresholds: [2s, 1s]\n", "las_thresholds[1]: \"1s\" must be > 0"},
           {"dlas_thresholds: 0s\n", "dlas_thresholds[0]: \"0s\" must be > 0"},
           {"las_thresholds: [1h, soon]\n", "las_thresholds[1]"},
           {"las_thresholds: {a: 1}\n", "las_thresholds: expected GPU-time durations"},
           {"order_quantum: -3s\n", "order_quantum"},
           {"dlas_promote_knob: much\n", "dlas_promote_knob: \"much\" is not a number"},
           {"dlas_promote_knob: -1\n", "dlas_promote_knob: -1"},
           {"head_of_line_blocking: perhaps\n", "head_of_line_blocking: \"perhaps\""}}) {
    ServerConfig c;
    const std::string path = WriteFile(text);
    Status s = ApplyConfigFile(path, c);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(s.message().find(needle), std::string::npos) << text << " -> " << s.message();
    std::filesystem::remove(path);
  }
}

TEST(ServerConfigTest, BadFilesNameTheKey) {
  for (const auto& [text, needle] :
       std::vector<std::pair<std::string, std::string>>{{"t1: soon\n", "t1"},
                                                        {"color: blue\n", "unknown key \"color\" (known: memory_table, "},
                                                        {"t1: 1s\nt2: 5s\nt1: 2s\n",
                                                         ":3: t1 given twice (first on line 1)"},
                                                        {"fail_max: x\n", "fail_max"},
                                                        {"node_heartbeat: 20s\n", "node_heartbeat"},
                                                        {"t1: [1, 2]\n", "t1"},
                                                        {"- a\n- b\n", "mapping"},
                                                        {"t1: : :\n", "config"},
                                                        {"idle_after: soon\n", "idle_after"},
                                                        {"idle_action: kill\n",
                                                         "idle_action: \"kill\" (use flag"},
                                                        {"fair_share_weight: lots\n",
                                                         "fair_share_weight: \"lots\" is not a number"},
                                                        {"fair_share_weight: -1\n",
                                                         "fair_share_weight: must be >= 0, got -1"},
                                                        {"fair_share_half_life: 7y\n",
                                                         "fair_share_half_life"},
                                                        {"reclaim_borrowed: maybe\n",
                                                         "reclaim_borrowed: \"maybe\" (use true or false)"},
           {"sqlite_synchronous: off\n",
            "sqlite_synchronous: \"off\" (use full or normal)"},
           {"capacity_wait: later\n",
            "capacity_wait: \"later\" (use stay_queued or failure_queue)"},
           // CN109992422A claim 4's placement keys: the key and the value are named.
           {"node_order: random\n",
            "node_order: \"random\" (use weighted_score, load_balance or min_fragmentation)"},
           {"gpu_order: worst_fit\n",
            "gpu_order: \"worst_fit\" (use spread, best_fit or min_fragmentation)"},
           {"node_order: [a]\n", "node_order: expected a single value"},
           {"use_reported_free: often\n", "use_reported_free: \"often\" (use true or false)"},
           {"score_weights: 1\n", "score_weights: expected a mapping"},
           {"score_weights: {}\n", "score_weights: expected a mapping"},
           {"score_weights: {luck: 1}\n", "score_weights: unknown scorer \"luck\""},
           {"score_weights: {server_load: -1}\n",
            "score_weights.server_load: \"-1\" must be a number from 0 to 1e6"},
           {"score_weights: {server_load: .nan}\n", "score_weights.server_load: \".nan\""},
           {"score_weights: {server_load: heavy}\n",
            "score_weights.server_load: \"heavy\" is not a number"},
           {"score_weights: {server_load: [1]}\n", "score_weights: expected scorer: weight"},
           {"score_weights: {server_load: 0, least_allocated: 0}\n",
            "score_weights: every weight is 0"},
           // CN115981827A claim 1's parallel filter keys.
           {"parallel_chunks: 0\n", "parallel_chunks: \"0\" must be >= 1"},
           {"parallel_threshold: -1\n", "parallel_threshold: \"-1\" must be >= 0"},
           {"parallel_threshold: lots\n", "parallel_threshold: \"lots\" is not an integer"},
           {"filter_workers: -2\n", "filter_workers: -2 must be from 0 (one per core) to 1024"},
           {"filter_workers: 5000\n", "filter_workers: 5000 must be from 0"}}) {
    ServerConfig c;
    const std::string path = WriteFile(text);
    Status s = ApplyConfigFile(path, c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(s.message().find(needle), std::string::npos) << text << " -> " << s.message();
    std::filesystem::remove(path);
  }
}

// CN109992422A claim 1: `memory_table:` names a file (relative to the config file) or is the
// table itself, checked at load so a bad row stops the start with its field.
TEST(ServerConfigTest, MemoryTableIsAFileOrInlineAndABadRowIsNamed) {
  ServerConfig c;
  const std::string path = WriteFile("memory_table: tables/gpu.yaml\n");
  ASSERT_TRUE(ApplyConfigFile(path, c).ok());
  EXPECT_EQ(c.memory_table,
            (std::filesystem::path(path).parent_path() / "tables/gpu.yaml").string());
  ServerConfig absolute;
  ASSERT_TRUE(ApplyConfigFile(WriteFile("memory_table: /etc/gpu.yaml\n"), absolute).ok());
  EXPECT_EQ(absolute.memory_table, "/etc/gpu.yaml");

  ServerConfig inline_table;
  Status s = ApplyConfigFile(
      WriteFile("memory_table:\n  rows:\n    - {model: resnet50, batch: 32, mib: 5000}\n"),
      inline_table);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(inline_table.memory_table_yaml.find("resnet50"), std::string::npos);

  ServerConfig bad;
  s = ApplyConfigFile(WriteFile("memory_table:\n  rows:\n    - {model: resnet50, mib: -1}\n"),
                      bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("memory_table"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rows.mib: must be >= 0"), std::string::npos) << s.message();
  s = ApplyConfigFile(WriteFile("memory_table: [a, b]\n"), bad);
  EXPECT_NE(s.message().find("memory_table: expected a file name or a table"), std::string::npos)
      << s.message();
}

TEST(ServerConfigTest, FairShareKeysAreRead) {
  ServerConfig c;
  EXPECT_EQ(c.scheduler.fair_share.fair_share_weight, 1000);  // defaults
  EXPECT_EQ(c.scheduler.fair_share.half_life_ms, 7 * 86'400'000LL);
  const std::string path = WriteFile(
      "fair_share_weight: 250.5\npriority_weight: 2000\nfair_share_half_life: 2d\n"
      "fair_share_recalc: 1m\nreclaim_borrowed: false\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.scheduler.fair_share.fair_share_weight, 250.5);
  EXPECT_EQ(c.scheduler.fair_share.priority_weight, 2000);
  EXPECT_EQ(c.scheduler.fair_share.half_life_ms, 2 * 86'400'000LL);
  EXPECT_EQ(c.scheduler.fair_share.recalc_ms, 60'000);
  EXPECT_FALSE(c.scheduler.reclaim_borrowed);
  std::filesystem::remove(path);
}

// CN109992422A claim 4: node order, GPU order and score weights are config keys.
TEST(ServerConfigTest, PlacementOrderKeysAreRead) {
  ServerConfig c;
  EXPECT_EQ(c.scheduler.placement.node_order, core::NodeOrder::kWeightedScore);  // defaults
  EXPECT_EQ(c.scheduler.placement.gpu_order, core::GpuOrder::kSpread);
  const std::string path = WriteFile(
      "node_order: load_balance\ngpu_order: best_fit\nuse_reported_free: true\n"
      "score_weights: {server_load: 2, gpu_best_fit: 0.5}\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const core::PlacementOptions& p = c.scheduler.placement;
  EXPECT_EQ(p.node_order, core::NodeOrder::kLoadBalance);
  EXPECT_EQ(p.gpu_order, core::GpuOrder::kBestFit);
  EXPECT_TRUE(p.filter.use_reported_free);
  // The mapping replaces the set: the two default scorers it does not name weigh 0.
  EXPECT_EQ(p.weights.weight, (std::array<double, core::kNumScorers>{0, 0, 2, 0.5}));
  std::filesystem::remove(path);

  ServerConfig back;
  const std::string again =
      WriteFile("node_order: weighted_score\ngpu_order: spread\n"
                "score_weights:\n  least_allocated: 3\n  balanced_allocation: 1\n");
  ASSERT_TRUE(ApplyConfigFile(again, back).ok());
  EXPECT_EQ(back.scheduler.placement.node_order, core::NodeOrder::kWeightedScore);
  EXPECT_EQ(back.scheduler.placement.weights.weight,
            (std::array<double, core::kNumScorers>{3, 1, 0, 0}));
  std::filesystem::remove(again);

  ServerConfig frag;  // the fragmentation-aware orders (core/fragmentation.h)
  const std::string third =
      WriteFile("node_order: min_fragmentation\ngpu_order: min_fragmentation\n");
  ASSERT_TRUE(ApplyConfigFile(third, frag).ok());
  EXPECT_EQ(frag.scheduler.placement.node_order, core::NodeOrder::kMinFragmentation);
  EXPECT_EQ(frag.scheduler.placement.gpu_order, core::GpuOrder::kMinFragmentation);
  EXPECT_EQ(frag.scheduler.placement.fragmentation, core::FragmentationMeasure::kPacking);
  std::filesystem::remove(third);
  const std::string fourth = WriteFile("fragmentation_measure: next_task\n");
  ASSERT_TRUE(ApplyConfigFile(fourth, frag).ok());
  EXPECT_EQ(frag.scheduler.placement.fragmentation, core::FragmentationMeasure::kNextTask);
  std::filesystem::remove(fourth);
}

// CN115981827A claim 1: N_par, W and the threads of the filter pool are config keys.
TEST(ServerConfigTest, ParallelFilterKeysAreRead) {
  ServerConfig c;
  EXPECT_EQ(c.scheduler.placement.parallel_threshold, 100u);  // defaults
  EXPECT_EQ(c.scheduler.placement.parallel_chunks, 16u);
  EXPECT_GE(c.FilterWorkers(), 1u);  // one per core, at most W
  EXPECT_LE(c.FilterWorkers(), 16u);
  const std::string path =
      WriteFile("parallel_threshold: 0\nparallel_chunks: 4\nfilter_workers: 3\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.scheduler.placement.parallel_threshold, 0u);
  EXPECT_EQ(c.scheduler.placement.parallel_chunks, 4u);
  EXPECT_EQ(c.FilterWorkers(), 3u);
  std::filesystem::remove(path);
}

TEST(ServerConfigTest, IdleAfterAndIdleActionAreReadAndChecked) {
  ServerConfig c;
  EXPECT_EQ(c.idle_after_ms, 30 * 60'000);  // defaults: 30m, flag only
  EXPECT_FALSE(c.idle_stop);
  const std::string path = WriteFile("idle_after: 90s\nidle_action: stop\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.idle_after_ms, 90'000);
  EXPECT_TRUE(c.idle_stop);
  std::filesystem::remove(path);
  ServerConfig negative;
  negative.idle_after_ms = -1;
  EXPECT_NE(negative.Validate().message().find("idle_after"), std::string::npos);
}

// Issue 38: history_retention, a duration (default 30 days, 0 = keep every task); bad values
// name the key and the value.
TEST(ServerConfigTest, Issue38_HistoryRetentionIsReadAndChecked) {
  ServerConfig c;
  EXPECT_EQ(c.history_retention_ms, 30LL * 86'400'000);
  const std::string path = WriteFile("history_retention: 90m\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.history_retention_ms, 90 * 60'000);
  EXPECT_TRUE(c.Validate().ok());
  std::filesystem::remove(path);
  const std::string bad = WriteFile("history_retention: forever\n");
  ServerConfig d;
  s = ApplyConfigFile(bad, d);
  EXPECT_NE(s.message().find("history_retention"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("forever"), std::string::npos) << s.ToString();
  std::filesystem::remove(bad);
  ServerConfig negative;
  negative.history_retention_ms = -60'000;
  s = negative.Validate();
  EXPECT_NE(s.message().find("history_retention: -"), std::string::npos) << s.ToString();
}

TEST(ServerConfigTest, TrustKeysAreReadAndChecked) {
  ServerConfig c;
  EXPECT_FALSE(c.insecure);
  EXPECT_FALSE(c.allow_root_tasks);
  const std::string path =
      WriteFile("tls_dir: /etc/gpusched/tls\ninsecure: true\nallow_root_tasks: yes\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.tls_dir, "/etc/gpusched/tls");
  EXPECT_TRUE(c.insecure);
  EXPECT_TRUE(c.allow_root_tasks);
  std::filesystem::remove(path);
  ServerConfig bad;
  const std::string bad_path = WriteFile("insecure: maybe\n");
  s = ApplyConfigFile(bad_path, bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("insecure: \"maybe\""), std::string::npos) << s.message();
  std::filesystem::remove(bad_path);
}

TEST(ServerConfigTest, ListeningOffLoopbackNeedsTlsAndAuthOrInsecure) {
  bool warn = true;
  ServerConfig c;  // 127.0.0.1, no HTTP
  EXPECT_TRUE(CheckExposure(c, &warn).ok());
  EXPECT_FALSE(warn);
  c.http = "[::1]:7071";
  EXPECT_TRUE(CheckExposure(c, &warn).ok());
  for (const auto& [listen, http] : {std::pair{"0.0.0.0:7070", ""},
                                     {"10.0.0.1:7070", ""},
                                     {":7070", ""},
                                     {"127.0.0.1:7070", "0.0.0.0:7071"}}) {
    ServerConfig open;
    open.listen = listen;
    open.http = http;
    Status s = CheckExposure(open, &warn);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << listen << " " << http;
    EXPECT_NE(s.message().find("--tls-dir"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("--insecure"), std::string::npos) << s.message();
    open.insecure = true;
    EXPECT_TRUE(CheckExposure(open, &warn).ok());
    EXPECT_TRUE(warn);
    open.insecure = false;
    open.tls_dir = "tls";
    EXPECT_TRUE(CheckExposure(open, &warn).ok());
    EXPECT_FALSE(warn);
    open.auth = "none";  // TLS without authentication is not enough
    s = CheckExposure(open, &warn);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("without authentication"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace gpusched::server

namespace gpusched::server {
namespace {

TEST(ServerConfigTest, Issue36_DoorLimitsAreKeysWithSizesAndDurations) {
  ServerConfig c;
  EXPECT_EQ(c.http_max_body, 1 << 20);
  const std::string path = WriteFile(
      "http_max_body: 2MiB\nhttp_header_timeout: 3s\nhttp_max_connections: 10\n"
      "http_hosts: a.example, b.example\nstream_limit: 5\nstream_limit_per_user: 2\n");
  Status s = ApplyConfigFile(path, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.http_max_body, 2 << 20);
  EXPECT_EQ(c.http_header_timeout_ms, 3000);
  EXPECT_EQ(c.http_max_connections, 10);
  EXPECT_EQ(c.http_hosts, "a.example, b.example");
  EXPECT_EQ(c.stream_limit, 5);
  EXPECT_EQ(c.stream_limit_per_user, 2);
  ASSERT_TRUE(ApplyConfigFile(WriteFile("http_max_body: 4096\n"), c).ok());
  EXPECT_EQ(c.http_max_body, 4096);
  s = ApplyConfigFile(WriteFile("stream_limit_per_user: 0\n"), c);
  EXPECT_NE(s.message().find("stream_limit_per_user: must be > 0"), std::string::npos)
      << s.message();
  s = ApplyConfigFile(WriteFile("http_max_body: lots\n"), c);
  EXPECT_NE(s.message().find("http_max_body"), std::string::npos) << s.message();
}

// Issue 40: a kill_grace the agents cannot wait for (over a year) is refused, naming it.
TEST(ServerConfigTest, Issue40_KillGraceOverAYearIsRefusedNamingTheValue) {
  ServerConfig c;
  const std::string path = WriteFile("kill_grace: 400d\n");
  Status s = ApplyConfigFile(path, c);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("kill_grace: 9600h must be from 0 to 8784h"), std::string::npos)
      << s.message();
  std::filesystem::remove(path);
  ServerConfig ok;
  ok.kill_grace_ms = 30LL * 86'400'000;  // 30 days: above INT_MAX ms, and fine
  EXPECT_TRUE(ok.Validate().ok());
}

}  // namespace
}  // namespace gpusched::server
