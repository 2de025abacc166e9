// Issue 39: every recording of every version (test/compat/VERSION/, compat_recordings.h) is
// read by the code of today, and each holds the values it was recorded with. A field renumbered
// or given another type in proto/gpusched/v1/gpusched.proto (or a journal key, or the store's
// JSON or tables renamed) fails here: the recorded bytes no longer land in that field.

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "agent/journal_record.h"
#include "base/testing/test_dir.h"
#include "compat_support.h"
#include "store/sqlite_store.h"

namespace gpusched::testing {
namespace {

namespace fs = std::filesystem;

void ExpectSpec(const v1::TaskSpec& s, bool with_user) {
  EXPECT_EQ(s.name(), "compat");
  EXPECT_EQ(s.gpus(), 1);
  EXPECT_EQ(s.gpu_mem_mib(), 4096);
  EXPECT_EQ(s.cpu_milli(), 500);
  EXPECT_EQ(s.mem_mib(), 512);
  EXPECT_TRUE(s.has_duration_ms() && s.duration_ms() == 60'000);
  EXPECT_TRUE(s.has_max_retries() && s.max_retries() == 1);
  EXPECT_EQ(std::vector<std::string>(s.command().begin(), s.command().end()),
            (std::vector<std::string>{"sh", "-c", "exit 0"}));
  EXPECT_EQ(ValueOr(s.env(), "COMPAT"), "1");
  EXPECT_EQ(ValueOr(s.node_selector(), "zone"), "a");
  ASSERT_EQ(s.tolerations_size(), 1);
  EXPECT_EQ(s.tolerations(0).key(), "spot");
  EXPECT_TRUE(s.tolerations(0).exists());
  EXPECT_EQ(s.tolerations(0).effect(), "NoSchedule");
  EXPECT_EQ(s.workdir(), "/tmp");
  EXPECT_TRUE(s.has_time_limit_ms() && s.time_limit_ms() == 3'600'000);
  EXPECT_EQ(s.priority_class(), "normal");
  EXPECT_TRUE(s.has_preemptible() && s.preemptible());
  EXPECT_TRUE(s.has_grace_ms() && s.grace_ms() == 5'000);
  EXPECT_TRUE(s.has_stop_signal() && s.stop_signal() == 15);
  EXPECT_EQ(s.user(), with_user ? "alice" : "");
}

void CheckAgentRegister(const std::string& bytes) {
  const auto m = ParseRecording<v1::AgentMessage>(bytes);
  ASSERT_TRUE(m.has_register_());
  const v1::RegisterNode& r = m.register_();
  EXPECT_EQ(r.name(), kCompatNode);
  EXPECT_EQ(r.address(), "127.0.0.1:7071");
  EXPECT_EQ(r.cpu_milli(), 16'000);
  EXPECT_EQ(r.mem_mib(), 65'536);
  ASSERT_EQ(r.gpus_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r.gpus(i).index(), i);
    EXPECT_EQ(r.gpus(i).model(), "compat-gpu");
    EXPECT_EQ(r.gpus(i).total_mib(), kCompatGpuMib);
  }
  EXPECT_EQ(ValueOr(r.labels(), "zone"), "a");
  EXPECT_TRUE(r.simulated());
  EXPECT_EQ(r.gpu_links_size(), 4);
  EXPECT_EQ(r.gpu_links(1), 3u);
  EXPECT_EQ(r.gpu_numa_size(), 2);
  ASSERT_EQ(r.taints_size(), 1);
  EXPECT_EQ(r.taints(0).key(), "spot");
  EXPECT_EQ(r.taints(0).effect(), "PreferNoSchedule");
  EXPECT_EQ(r.agent_instance(), "compat-instance-1");
}

void CheckAgentHeartbeat(const std::string& bytes) {
  const auto m = ParseRecording<v1::AgentMessage>(bytes);
  ASSERT_TRUE(m.has_heartbeat());
  const v1::NodeHeartbeat& h = m.heartbeat();
  ASSERT_EQ(h.gpu_free_mib_size(), 2);
  EXPECT_EQ(h.gpu_free_mib(0), kCompatGpuMib - 4096);
  EXPECT_EQ(h.gpu_free_mib(1), kCompatGpuMib);
  ASSERT_EQ(h.running_size(), 1);
  EXPECT_EQ(h.running(0).id(), 1u);
  EXPECT_EQ(h.running(0).attempt(), 1);
  ASSERT_EQ(h.gpu_health_size(), 2);
  EXPECT_FALSE(h.gpu_health(1).unhealthy());
  EXPECT_EQ(h.gpu_health(1).last_error(), "xid 79 (cleared)");
}

void CheckTaskStarted(const std::string& bytes) {
  const auto m = ParseRecording<v1::AgentMessage>(bytes);
  ASSERT_TRUE(m.has_status());
  EXPECT_EQ(m.status().id(), 1u);
  EXPECT_EQ(m.status().attempt(), 1);
  EXPECT_EQ(m.status().kind(), v1::TaskStatus::STARTED);
}

void CheckTaskHeartbeats(const std::string& bytes) {
  const auto m = ParseRecording<v1::AgentMessage>(bytes);
  ASSERT_TRUE(m.has_task_heartbeats());
  ASSERT_EQ(m.task_heartbeats().tasks_size(), 1);
  const v1::TaskRef& t = m.task_heartbeats().tasks(0);
  EXPECT_EQ(t.id(), 1u);
  EXPECT_EQ(t.attempt(), 1);
  EXPECT_TRUE(t.has_gpu_util() && t.gpu_util() == 50);
  EXPECT_TRUE(t.has_gpu_mem_used_mib() && t.gpu_mem_used_mib() == 2048);
  EXPECT_EQ(t.executor_status(), v1::TaskRef::RUNNING);
}

void CheckTaskFinished(const std::string& bytes) {
  const auto m = ParseRecording<v1::AgentMessage>(bytes);
  ASSERT_TRUE(m.has_status());
  const v1::TaskStatus& s = m.status();
  EXPECT_EQ(s.id(), 1u);
  EXPECT_EQ(s.kind(), v1::TaskStatus::FINISHED);
  EXPECT_EQ(s.exit_code(), 0);
  EXPECT_EQ(s.peak_gpu_mem_mib(), 2048);
  EXPECT_EQ(s.finished_ms(), 1'764'892'800'000);
  EXPECT_EQ(s.ended_ago_ms(), 5);
  EXPECT_EQ(s.peak_source(), v1::TaskStatus::PEAK_AGENT_MEASURED);
}

void CheckRegistered(const std::string& bytes) {
  const auto m = ParseRecording<v1::ServerMessage>(bytes);
  ASSERT_TRUE(m.has_registered());
  const v1::Registered& r = m.registered();
  EXPECT_EQ(r.node_heartbeat_ms(), 2'000);
  EXPECT_EQ(r.task_heartbeat_ms(), 5'000);
  EXPECT_EQ(r.kill_grace_ms(), 10'000);
  EXPECT_TRUE(r.allow_root_tasks());
  EXPECT_EQ(r.log_read_key(), "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(r.node_lost_after_ms(), 300'000);
}

void CheckAssign(const std::string& bytes) {
  const auto m = ParseRecording<v1::ServerMessage>(bytes);
  ASSERT_TRUE(m.has_assign());
  const v1::Assign& a = m.assign();
  EXPECT_EQ(a.id(), 1u);
  EXPECT_EQ(a.attempt(), 1);
  ASSERT_EQ(a.gpus_size(), 1);
  EXPECT_EQ(a.gpus(0), 0);
  ASSERT_EQ(a.gpu_mem_mib_size(), 1);
  EXPECT_EQ(a.gpu_mem_mib(0), 4096);
  EXPECT_EQ(a.command_size(), 3);
  EXPECT_EQ(ValueOr(a.env(), "COMPAT"), "1");
  EXPECT_EQ(a.name(), "compat");
  EXPECT_TRUE(a.has_duration_ms() && a.duration_ms() == 60'000);
  EXPECT_EQ(a.workdir(), "/tmp");
  EXPECT_EQ(a.user(), "alice");
  EXPECT_TRUE(a.submitted_by_root());
  EXPECT_TRUE(a.has_heartbeat_timeout_ms() && a.heartbeat_timeout_ms() == 120'000);
  EXPECT_EQ(a.rank(), 1);
  EXPECT_EQ(a.cgroup_mem_mib(), 512);
  EXPECT_EQ(a.cgroup_cpu_milli(), 500);
  EXPECT_EQ(a.stop_signal(), 15);
}

void CheckKill(const std::string& bytes) {
  const auto m = ParseRecording<v1::ServerMessage>(bytes);
  ASSERT_TRUE(m.has_kill());
  EXPECT_EQ(m.kill().id(), 2u);
  EXPECT_EQ(m.kill().attempt(), 1);
  EXPECT_EQ(m.kill().reason(), "cancelled");
  EXPECT_TRUE(m.kill().has_grace_ms() && m.kill().grace_ms() == 3'000);
}

void CheckAck(const std::string& bytes) {
  const auto m = ParseRecording<v1::ServerMessage>(bytes);
  ASSERT_TRUE(m.has_ack());
  EXPECT_EQ(m.ack().id(), 1u);
  EXPECT_EQ(m.ack().attempt(), 1);
}

void CheckReadLog(const std::string& bytes) {
  const auto r = ParseRecording<v1::ReadLogRequest>(bytes);
  EXPECT_EQ(r.id(), 1u);
  EXPECT_EQ(r.attempt(), 1);
  EXPECT_EQ(r.offset(), 100);
  EXPECT_EQ(r.max_bytes(), 65'536);
  EXPECT_EQ(r.capability_expires_ms(), 1'764'892'860'000);
  EXPECT_EQ(r.capability(), std::string(32, '\x5a'));
}

void CheckSubmit(const std::string& bytes) {
  const auto r = ParseRecording<v1::SubmitRequest>(bytes);
  ExpectSpec(r.spec(), false);
  EXPECT_EQ(r.idempotency_key(), "");
  EXPECT_FALSE(r.has_array());
}

void CheckSubmitArray(const std::string& bytes) {
  const auto r = ParseRecording<v1::SubmitRequest>(bytes);
  ExpectSpec(r.spec(), false);
  EXPECT_EQ(r.idempotency_key(), "compat-key-1");
  ASSERT_TRUE(r.has_array());
  EXPECT_EQ(r.array().first(), 0);
  EXPECT_EQ(r.array().last(), 2);
}

void CheckGetTask(const std::string& bytes) {
  EXPECT_EQ(ParseRecording<v1::GetTaskRequest>(bytes).id(), 1u);
}

void CheckWhy(const std::string& bytes) {
  EXPECT_EQ(ParseRecording<v1::WhyRequest>(bytes).id(), 1u);
}

void CheckCancel(const std::string& bytes) {
  EXPECT_EQ(ParseRecording<v1::CancelRequest>(bytes).id(), 2u);
}

void CheckListTasks(const std::string& bytes) {
  const auto r = ParseRecording<v1::ListTasksRequest>(bytes);
  EXPECT_EQ(r.limit(), 100);
  ASSERT_EQ(r.states_size(), 2);
  EXPECT_EQ(r.states(0), "running");
  EXPECT_EQ(r.states(1), "succeeded");
}

void CheckLogs(const std::string& bytes) {
  const auto r = ParseRecording<v1::LogsRequest>(bytes);
  EXPECT_EQ(r.id(), 1u);
  EXPECT_EQ(r.max_bytes(), 65'536);
}

void CheckCordon(const std::string& bytes) {
  const auto r = ParseRecording<v1::CordonRequest>(bytes);
  EXPECT_EQ(r.node(), kCompatNode);
  EXPECT_TRUE(r.cordon());
}

void CheckSubmitAnswer(const std::string& bytes) {
  const auto r = ParseRecording<v1::SubmitResponse>(bytes);
  EXPECT_EQ(r.id(), 1u);
  EXPECT_EQ(std::vector<uint64_t>(r.ids().begin(), r.ids().end()),
            (std::vector<uint64_t>{1, 2, 3}));
}

void CheckTaskAnswer(const std::string& bytes) {
  const auto t = ParseRecording<v1::Task>(bytes);
  EXPECT_EQ(t.id(), 1u);
  EXPECT_EQ(t.name(), "compat");
  EXPECT_EQ(t.state(), "succeeded");
  EXPECT_EQ(t.node(), kCompatNode);
  ASSERT_EQ(t.gpus_size(), 1);
  EXPECT_EQ(t.gpu_mem_mib(0), 4096);
  EXPECT_TRUE(t.has_exit_code() && t.exit_code() == 0);
  EXPECT_EQ(t.attempts(), 1);
  EXPECT_EQ(t.st(), 12);
  EXPECT_EQ(t.pt(), 3);
  EXPECT_EQ(t.gpu_mem_need_mib(), 4096);
  EXPECT_EQ(t.mem_source(), "explicit");
  EXPECT_EQ(t.submitted_ms(), 1'764'892'700'000);
  EXPECT_EQ(t.finished_ms(), 1'764'892'800'000);
  ExpectSpec(t.spec(), true);
  ASSERT_EQ(t.history_size(), 1);
  EXPECT_EQ(t.history(0).state(), "pending");
  EXPECT_EQ(t.history(0).reason(), "submitted");
  EXPECT_TRUE(t.has_gpu_util() && t.gpu_util() == 50);
  EXPECT_EQ(t.executor_status(), "running");
  ASSERT_EQ(t.gang_nodes_size(), 1);
  ASSERT_EQ(t.redacted_size(), 1);
  EXPECT_EQ(t.redacted(0), "env");
  EXPECT_EQ(t.checkpoints(), 1);
}

void CheckNodesAnswer(const std::string& bytes) {
  const auto r = ParseRecording<v1::ListNodesResponse>(bytes);
  ASSERT_EQ(r.nodes_size(), 1);
  const v1::Node& n = r.nodes(0);
  EXPECT_EQ(n.name(), kCompatNode);
  EXPECT_TRUE(n.reachable() && n.available() && n.connected());
  EXPECT_EQ(n.cpu_milli(), 16'000);
  EXPECT_EQ(n.cpu_allocated_milli(), 500);
  EXPECT_EQ(n.running_tasks(), 1);
  ASSERT_EQ(n.gpus_size(), 2);
  EXPECT_EQ(n.gpus(0).allocated_mib(), 4096);
  EXPECT_EQ(n.gpus(0).reported_free_mib(), kCompatGpuMib - 4096);
  EXPECT_EQ(n.gpus(0).tasks(), 1);
  EXPECT_EQ(ValueOr(n.labels(), "zone"), "a");
  EXPECT_TRUE(n.lost());
  EXPECT_EQ(r.eviction_hold(), "compat: held");
}

void CheckWhyAnswer(const std::string& bytes) {
  const auto r = ParseRecording<v1::WhyResponse>(bytes);
  EXPECT_EQ(r.id(), 1u);
  EXPECT_EQ(r.state(), "pending");
  EXPECT_EQ(r.claim_status(), 2);
  EXPECT_EQ(r.queue(), "FQ");
  EXPECT_EQ(r.total_nodes(), 1);
  EXPECT_EQ(ValueOr(r.rejected(), "gpu_fit"), 1);
  ASSERT_EQ(r.breakdown_size(), 1);
  EXPECT_EQ(r.breakdown(0).value(), 0.75);
  EXPECT_EQ(r.need(), "needs 4GiB on one GPU; most free is 2GiB on compat-n1 GPU 0");
  EXPECT_EQ(r.pass(), 7);
  EXPECT_EQ(r.waits_for(), "waits for capacity");
}

void CheckJournalRun(const std::string& text) {
  agent::journal::RunRecord r;
  ASSERT_TRUE(agent::journal::ParseRun(text.c_str(), &r)) << text;
  EXPECT_EQ(r.shim.pid, 4242);
  EXPECT_EQ(r.shim.start_ticks, 123456);
  EXPECT_STREQ(r.shim.boot_id, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
  EXPECT_EQ(r.task_pgid, 4243);
  EXPECT_EQ(r.task_start_ticks, 123460);
  EXPECT_EQ(r.started_ms, 1'764'892'700'000);
}

void CheckJournalExit(const std::string& text) {
  agent::journal::ExitRecord e;
  ASSERT_TRUE(agent::journal::ParseExit(text.c_str(), &e)) << text;
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_STREQ(e.reason, "exit code 3");
  EXPECT_EQ(e.finished_ms, 1'764'892'800'000);
  EXPECT_TRUE(e.permanent);
}

// The recorded store, made again from its SQL, opens with today's SqliteStore (migrated
// forward) and holds every row.
void CheckStore(const std::string& sql, const fs::path& scratch) {
  const std::string path = (scratch / "state.db").string();
  fs::remove(path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err != nullptr ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
  auto s = store::SqliteStore::Open(path, {});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto task = (*s)->GetTask(1);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ(task->task.spec.name, "compat");
  EXPECT_EQ(task->task.state, core::TaskState::kSucceeded);
  EXPECT_EQ(task->task.spec.command, (std::vector<std::string>{"sh", "-c", "exit 0"}));
  EXPECT_EQ(task->task.spec.user, "alice");
  ASSERT_TRUE(task->last_placement.has_value());
  EXPECT_EQ(task->last_placement->node, kCompatNode);
  EXPECT_EQ(task->last_placement->gpu_mem_mib, std::vector<MiB>{4096});
  auto key = (*s)->LookupIdempotencyKey("compat-key-1");
  ASSERT_TRUE(key.ok() && key->has_value());
  EXPECT_EQ(**key, 1u);
  auto nodes = (*s)->LoadNodes();
  ASSERT_TRUE(nodes.ok() && nodes->size() == 1u);
  EXPECT_EQ((*nodes)[0].spec.name, kCompatNode);
  EXPECT_TRUE((*nodes)[0].cordoned);
  EXPECT_EQ((*nodes)[0].spec.gpus.size(), 2u);
  EXPECT_EQ((*nodes)[0].spec.labels.at("zone"), "a");
  auto tokens = (*s)->LoadTokens();
  ASSERT_TRUE(tokens.ok() && tokens->size() == 1u);
  EXPECT_EQ((*tokens)[0].user, "alice");
  EXPECT_EQ((*tokens)[0].secret_sha256, std::string(64, 'a'));
  auto quotas = (*s)->LoadQuotas();
  ASSERT_TRUE(quotas.ok() && quotas->size() == 1u);
  EXPECT_EQ((*quotas)[0].guaranteed_gpus, 4);
  EXPECT_EQ((*quotas)[0].max_priority, "high");
  auto quarantined = (*s)->LoadQuarantine();
  ASSERT_TRUE(quarantined.ok());
  EXPECT_TRUE(quarantined->empty());
}

using Check = std::function<void(const std::string& contents, const fs::path& scratch)>;

template <void (*F)(const std::string&)>
Check Plain() {
  return [](const std::string& contents, const fs::path&) { F(contents); };
}

// Every recording's check, by file name. A recording without a check fails the test.
const std::map<std::string, Check>& Checks() {
  static const std::map<std::string, Check> checks = {
      {"agent_register.binpb", Plain<CheckAgentRegister>()},
      {"agent_heartbeat.binpb", Plain<CheckAgentHeartbeat>()},
      {"agent_task_started.binpb", Plain<CheckTaskStarted>()},
      {"agent_task_heartbeats.binpb", Plain<CheckTaskHeartbeats>()},
      {"agent_task_finished.binpb", Plain<CheckTaskFinished>()},
      {"server_registered.binpb", Plain<CheckRegistered>()},
      {"server_assign.binpb", Plain<CheckAssign>()},
      {"server_kill.binpb", Plain<CheckKill>()},
      {"server_ack.binpb", Plain<CheckAck>()},
      {"server_read_log.binpb", Plain<CheckReadLog>()},
      {"cli_submit.binpb", Plain<CheckSubmit>()},
      {"cli_submit_array.binpb", Plain<CheckSubmitArray>()},
      {"cli_get_task.binpb", Plain<CheckGetTask>()},
      {"cli_list_tasks.binpb", Plain<CheckListTasks>()},
      {"cli_why.binpb", Plain<CheckWhy>()},
      {"cli_cancel.binpb", Plain<CheckCancel>()},
      {"cli_logs.binpb", Plain<CheckLogs>()},
      {"cli_cordon.binpb", Plain<CheckCordon>()},
      {"answer_submit.binpb", Plain<CheckSubmitAnswer>()},
      {"answer_task.binpb", Plain<CheckTaskAnswer>()},
      {"answer_list_nodes.binpb", Plain<CheckNodesAnswer>()},
      {"answer_why.binpb", Plain<CheckWhyAnswer>()},
      {"journal_run.txt", Plain<CheckJournalRun>()},
      {"journal_exit.txt", Plain<CheckJournalExit>()},
      {"store.sql", CheckStore},
  };
  return checks;
}

TEST(CompatRecordingsTest, Issue39_EveryRecordingOfEveryVersionIsReadByTodaysCode) {
  TestDir scratch("gpusched_compat");
  const std::vector<fs::path> versions = VersionDirs();
  ASSERT_FALSE(versions.empty()) << "no recordings under " << kCompatDir;
  bool current = false;
  for (const fs::path& version : versions) {
    current = current || version.filename() == GPUSCHED_VERSION;
    std::set<std::string> seen;
    for (const auto& entry : fs::directory_iterator(version)) {
      const std::string name = entry.path().filename().string();
      SCOPED_TRACE(entry.path().string());
      auto check = Checks().find(name);
      ASSERT_NE(check, Checks().end())
          << "no check for this recording: add one to test/compat_checks.cc";
      check->second(ReadRecording(entry.path()), scratch.path());
      seen.insert(name);
    }
    // Every version recorded at least what the first one did.
    for (const auto& [name, check] : Checks()) {
      EXPECT_TRUE(seen.count(name)) << version << " lacks " << name;
    }
  }
  EXPECT_TRUE(current) << "no recordings of this version (" GPUSCHED_VERSION
                       << ") under " << kCompatDir << ": run compat_record (docs/upgrades.md)";
}

// The check above would see a renumbered or retyped field: here the recorded TaskSpec.gpus
// (field 2, a varint) is moved to another number, and then written as a string, as old bytes
// look to a .proto in which `gpus` was renumbered or given another type. CheckSubmit fails.
TEST(CompatRecordingsTest, Issue39_AFieldMovedOrRetypedIsCaught) {
  v1::SubmitRequest without = ParseRecording<v1::SubmitRequest>(
      ReadRecording(VersionDirs().front() / "cli_submit.binpb"));
  without.mutable_spec()->clear_gpus();
  for (const std::string& gpus : {VarintField(1999, 1), BytesField(2, "1")}) {
    ::testing::TestPartResultArray failures;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
      CheckSubmit(without.SerializeAsString() + BytesField(1, gpus));
    }
    EXPECT_EQ(failures.size(), 1) << "gpus is not 1";
  }
  // And the bytes as recorded pass.
  CheckSubmit(ReadRecording(VersionDirs().front() / "cli_submit.binpb"));
}

}  // namespace
}  // namespace gpusched::testing
