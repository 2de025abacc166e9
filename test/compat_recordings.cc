#include "compat_recordings.h"

#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <stdexcept>

#include "agent/journal_record.h"
#include "gpusched/v1/gpusched.pb.h"
#include "store/sqlite_store.h"

namespace gpusched::testing {
namespace {

namespace v1 = ::gpusched::v1;

// The task every recording speaks of: what `gpusched submit` sends for
//   submit --gpus 1 --gpu-mem 4GiB --cpu 500m --mem 512MiB --duration 1m --retries 1
//          --time 1h --selector zone=a --toleration spot:NoSchedule --priority normal
//          --grace 5s --signal TERM --name compat --workdir /tmp -- sh -c 'exit 0'
v1::TaskSpec Spec() {
  v1::TaskSpec s;
  s.set_name("compat");
  s.set_gpus(1);
  s.set_gpu_mem_mib(4096);
  s.set_cpu_milli(500);
  s.set_mem_mib(512);
  s.set_duration_ms(60'000);
  s.set_max_retries(1);
  for (const char* a : {"sh", "-c", "exit 0"}) s.add_command(a);
  (*s.mutable_env())["COMPAT"] = "1";
  (*s.mutable_node_selector())["zone"] = "a";
  v1::Toleration* t = s.add_tolerations();
  t->set_key("spot");
  t->set_exists(true);
  t->set_effect("NoSchedule");
  s.set_workdir("/tmp");
  s.set_time_limit_ms(3'600'000);
  s.set_priority_class("normal");
  s.set_preemptible(true);
  s.set_grace_ms(5'000);
  s.set_stop_signal(15);
  return s;
}

v1::Gpu Gpu(int index, int64_t allocated_mib) {
  v1::Gpu g;
  g.set_index(index);
  g.set_model("compat-gpu");
  g.set_total_mib(kCompatGpuMib);
  g.set_allocated_mib(allocated_mib);
  g.set_reported_free_mib(kCompatGpuMib - allocated_mib);
  g.set_tasks(allocated_mib > 0 ? 1 : 0);
  g.set_numa_node(0);
  return g;
}

void AgentMessages(std::map<std::string, std::string>& out) {
  v1::AgentMessage reg;
  v1::RegisterNode* r = reg.mutable_register_();
  r->set_name(kCompatNode);
  r->set_address("127.0.0.1:7071");
  r->set_cpu_milli(16'000);
  r->set_mem_mib(65'536);
  for (int i = 0; i < 2; ++i) {
    v1::Gpu* g = r->add_gpus();
    g->set_index(i);
    g->set_model("compat-gpu");
    g->set_total_mib(kCompatGpuMib);
  }
  (*r->mutable_labels())["zone"] = "a";
  r->set_simulated(true);
  for (uint32_t link : {3u, 3u, 3u, 3u}) r->add_gpu_links(link);
  for (int numa : {0, 0}) r->add_gpu_numa(numa);
  v1::Taint* taint = r->add_taints();
  taint->set_key("spot");
  taint->set_effect("PreferNoSchedule");
  r->set_agent_instance("compat-instance-1");
  out["agent_register.binpb"] = reg.SerializeAsString();

  v1::AgentMessage hb;
  hb.mutable_heartbeat()->add_gpu_free_mib(kCompatGpuMib - 4096);
  hb.mutable_heartbeat()->add_gpu_free_mib(kCompatGpuMib);
  v1::TaskRef* running = hb.mutable_heartbeat()->add_running();
  running->set_id(1);
  running->set_attempt(1);
  for (int i = 0; i < 2; ++i) hb.mutable_heartbeat()->add_gpu_health();
  hb.mutable_heartbeat()->mutable_gpu_health(1)->set_last_error("xid 79 (cleared)");
  out["agent_heartbeat.binpb"] = hb.SerializeAsString();

  v1::AgentMessage started;
  started.mutable_status()->set_id(1);
  started.mutable_status()->set_attempt(1);
  started.mutable_status()->set_kind(v1::TaskStatus::STARTED);
  out["agent_task_started.binpb"] = started.SerializeAsString();

  v1::AgentMessage beats;
  v1::TaskRef* ref = beats.mutable_task_heartbeats()->add_tasks();
  ref->set_id(1);
  ref->set_attempt(1);
  ref->set_gpu_util(50);
  ref->set_gpu_mem_used_mib(2048);
  ref->set_executor_status(v1::TaskRef::RUNNING);
  out["agent_task_heartbeats.binpb"] = beats.SerializeAsString();

  v1::AgentMessage finished;
  v1::TaskStatus* f = finished.mutable_status();
  f->set_id(1);
  f->set_attempt(1);
  f->set_kind(v1::TaskStatus::FINISHED);
  f->set_exit_code(0);
  f->set_peak_gpu_mem_mib(2048);
  f->set_finished_ms(1'764'892'800'000);
  f->set_ended_ago_ms(5);
  f->set_peak_source(v1::TaskStatus::PEAK_AGENT_MEASURED);
  out["agent_task_finished.binpb"] = finished.SerializeAsString();
}

void ServerMessages(std::map<std::string, std::string>& out) {
  v1::ServerMessage registered;
  v1::Registered* r = registered.mutable_registered();
  r->set_node_heartbeat_ms(2'000);
  r->set_task_heartbeat_ms(5'000);
  r->set_kill_grace_ms(10'000);
  r->set_allow_root_tasks(true);
  r->set_log_read_key("0123456789abcdef0123456789abcdef");
  r->set_node_lost_after_ms(300'000);
  out["server_registered.binpb"] = registered.SerializeAsString();

  v1::ServerMessage assign;
  v1::Assign* a = assign.mutable_assign();
  const v1::TaskSpec spec = Spec();
  a->set_id(1);
  a->set_attempt(1);
  a->add_gpus(0);
  a->add_gpu_mem_mib(4096);
  *a->mutable_command() = spec.command();
  *a->mutable_env() = spec.env();
  a->set_name("compat");
  a->set_duration_ms(60'000);
  a->set_workdir("/tmp");
  a->set_user("alice");
  a->set_submitted_by_root(true);
  a->set_heartbeat_timeout_ms(120'000);
  a->set_rank(1);
  a->set_cgroup_mem_mib(512);
  a->set_cgroup_cpu_milli(500);
  a->set_stop_signal(15);
  out["server_assign.binpb"] = assign.SerializeAsString();

  v1::ServerMessage kill;
  kill.mutable_kill()->set_id(2);
  kill.mutable_kill()->set_attempt(1);
  kill.mutable_kill()->set_reason("cancelled");
  kill.mutable_kill()->set_grace_ms(3'000);
  out["server_kill.binpb"] = kill.SerializeAsString();

  v1::ServerMessage ack;
  ack.mutable_ack()->set_id(1);
  ack.mutable_ack()->set_attempt(1);
  out["server_ack.binpb"] = ack.SerializeAsString();

  // What the server asks an agent's log service (Agent.ReadLog).
  v1::ReadLogRequest read;
  read.set_id(1);
  read.set_attempt(1);
  read.set_offset(100);
  read.set_max_bytes(65'536);
  read.set_capability_expires_ms(1'764'892'860'000);
  read.set_capability(std::string(32, '\x5a'));
  out["server_read_log.binpb"] = read.SerializeAsString();
}

void CliRequests(std::map<std::string, std::string>& out) {
  v1::SubmitRequest submit;
  *submit.mutable_spec() = Spec();
  out["cli_submit.binpb"] = submit.SerializeAsString();
  v1::SubmitRequest array;
  *array.mutable_spec() = Spec();
  array.set_idempotency_key("compat-key-1");
  array.mutable_array()->set_first(0);
  array.mutable_array()->set_last(2);
  out["cli_submit_array.binpb"] = array.SerializeAsString();
  v1::GetTaskRequest show;
  show.set_id(1);
  out["cli_get_task.binpb"] = show.SerializeAsString();
  v1::ListTasksRequest ls;
  ls.set_limit(100);
  ls.add_states("running");
  ls.add_states("succeeded");
  out["cli_list_tasks.binpb"] = ls.SerializeAsString();
  v1::WhyRequest why;
  why.set_id(1);
  out["cli_why.binpb"] = why.SerializeAsString();
  v1::CancelRequest cancel;
  cancel.set_id(2);
  out["cli_cancel.binpb"] = cancel.SerializeAsString();
  v1::LogsRequest logs;
  logs.set_id(1);
  logs.set_offset(0);
  logs.set_max_bytes(65'536);
  logs.set_rank(0);
  out["cli_logs.binpb"] = logs.SerializeAsString();
  v1::CordonRequest cordon;
  cordon.set_node(kCompatNode);
  cordon.set_cordon(true);
  out["cli_cordon.binpb"] = cordon.SerializeAsString();
}

void Answers(std::map<std::string, std::string>& out) {
  v1::SubmitResponse submitted;
  submitted.set_id(1);
  for (uint64_t id : {1, 2, 3}) submitted.add_ids(id);
  out["answer_submit.binpb"] = submitted.SerializeAsString();

  v1::Task t;
  t.set_id(1);
  t.set_name("compat");
  t.set_state("succeeded");
  t.set_node(kCompatNode);
  t.add_gpus(0);
  t.add_gpu_mem_mib(4096);
  t.set_exit_code(0);
  t.set_attempts(1);
  t.set_st(12);
  t.set_pt(3);
  t.set_gpu_mem_need_mib(4096);
  t.set_mem_source("explicit");
  t.set_submitted_ms(1'764'892'700'000);
  t.set_finished_ms(1'764'892'800'000);
  *t.mutable_spec() = Spec();
  t.mutable_spec()->set_user("alice");
  v1::Transition* h = t.add_history();
  h->set_at_ms(1'764'892'700'000);
  h->set_state("pending");
  h->set_reason("submitted");
  t.set_gpu_util(50);
  t.set_executor_status("running");
  t.add_gang_nodes(kCompatNode);
  t.set_priority(0);
  t.add_redacted("env");
  t.set_checkpoints(1);
  out["answer_task.binpb"] = t.SerializeAsString();

  v1::ListNodesResponse nodes;
  v1::Node* n = nodes.add_nodes();
  n->set_name(kCompatNode);
  n->set_address("127.0.0.1:7071");
  n->set_reachable(true);
  n->set_available(true);
  n->set_connected(true);
  n->set_cpu_milli(16'000);
  n->set_mem_mib(65'536);
  n->set_cpu_allocated_milli(500);
  n->set_running_tasks(1);
  *n->add_gpus() = Gpu(0, 4096);
  *n->add_gpus() = Gpu(1, 0);
  (*n->mutable_labels())["zone"] = "a";
  n->set_lost(true);
  nodes.set_eviction_hold("compat: held");
  out["answer_list_nodes.binpb"] = nodes.SerializeAsString();

  v1::WhyResponse why;
  why.set_id(1);
  why.set_state("pending");
  why.set_claim_status(2);
  why.set_queue("FQ");
  why.set_summary("0/1 nodes: 1 insufficient GPU memory");
  why.set_total_nodes(1);
  (*why.mutable_rejected())["gpu_fit"] = 1;
  v1::ScorePart* part = why.add_breakdown();
  part->set_name("least_allocated");
  part->set_value(0.75);
  part->set_weight(1);
  why.set_need("needs 4GiB on one GPU; most free is 2GiB on compat-n1 GPU 0");
  why.set_pass(7);
  why.set_waits_for("waits for capacity");
  out["answer_why.binpb"] = why.SerializeAsString();
}

// What a task's supervisor (gpusched-shim) writes: a new agent reads these from the shims the
// agent before it started (an agent upgraded while its tasks run).
void JournalRecords(std::map<std::string, std::string>& out) {
  agent::journal::RunRecord run;
  run.shim.pid = 4242;
  run.shim.start_ticks = 123456;
  std::snprintf(run.shim.boot_id, sizeof run.shim.boot_id, "%s",
                "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
  run.task_pgid = 4243;
  run.task_start_ticks = 123460;
  run.started_ms = 1'764'892'700'000;
  char buf[1024];
  out["journal_run.txt"] = std::string(buf, agent::journal::FormatRun(run, buf, sizeof buf));
  agent::journal::ExitRecord exit;
  exit.exit_code = 3;
  std::snprintf(exit.reason, sizeof exit.reason, "%s", "exit code 3");
  exit.finished_ms = 1'764'892'800'000;
  exit.permanent = true;
  out["journal_exit.txt"] = std::string(buf, agent::journal::FormatExit(exit, buf, sizeof buf));
}

// The rows of one store: a finished task with its idempotency key, a node, a token, a quota.
store::WriteBatch StoreRows() {
  store::WriteBatch b;
  store::TaskRecord r;
  core::Task& t = r.task;
  t.id = TaskId(1);
  t.spec.name = "compat";
  t.spec.gpus = 1;
  t.spec.gpu_mem_mib = 4096;
  t.spec.command = {"sh", "-c", "exit 0"};
  t.spec.env = {{"COMPAT", "1"}};
  t.spec.user = "alice";
  t.state = core::TaskState::kSucceeded;
  t.attempts = 1;
  t.exit_code = 0;
  t.history.push_back({1'764'892'700'000, core::TaskState::kPending, "submitted"});
  core::Placement p;
  p.node = kCompatNode;
  p.gpus = {0};
  p.gpu_mem_mib = {4096};
  r.last_placement = p;
  b.tasks.push_back(r);
  b.idempotency_keys["compat-key-1"] = 1;
  store::NodeRecord n;
  n.spec.name = kCompatNode;
  n.spec.address = "127.0.0.1:7071";
  n.spec.capacity = {16'000, 65'536};
  n.spec.gpus = {{"compat-gpu", kCompatGpuMib}, {"compat-gpu", kCompatGpuMib}};
  n.spec.labels = {{"zone", "a"}};
  n.cordoned = true;
  b.nodes.push_back(n);
  store::TokenRecord token;
  token.id = "compat0token1";
  token.user = "alice";
  token.team = "ml";
  token.created_ms = 1'764'892'600'000;
  token.secret_sha256 = std::string(64, 'a');
  b.tokens.push_back(token);
  core::TeamQuota q;
  q.team = "ml";
  q.guaranteed_gpus = 4;
  q.borrow_gpus = 2;
  q.max_priority = "high";
  b.quotas.push_back(q);
  return b;
}

// The SQL text that makes the database at `path` again (sqlite3's .dump, in short): its
// tables and indexes, their rows, and its schema version.
std::string Dump(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    throw std::runtime_error("compat: cannot open " + path);
  }
  std::string sql = "PRAGMA user_version=" + std::to_string(store::SqliteStore::SchemaVersion()) +
                    ";\nBEGIN;\n";
  auto each = [&](const std::string& query, const std::function<void(sqlite3_stmt*)>& fn) {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, query.c_str(), -1, &st, nullptr);
    while (sqlite3_step(st) == SQLITE_ROW) fn(st);
    sqlite3_finalize(st);
  };
  auto text = [](sqlite3_stmt* st, int col) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, col));
    return p != nullptr ? std::string(p) : std::string();
  };
  each("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
       "ORDER BY name",
       [&](sqlite3_stmt* table) {
         const std::string name = text(table, 0);
         sql += text(table, 1) + ";\n";
         std::string cols;
         each("SELECT name FROM pragma_table_info('" + name + "') ORDER BY cid",
              [&](sqlite3_stmt* col) {
                cols += std::string(cols.empty() ? "" : " || ',' || ") + "quote(\"" +
                        text(col, 0) + "\")";
              });
         each("SELECT 'INSERT INTO \"" + name + "\" VALUES(' || " + cols + " || ');' FROM \"" +
                  name + "\"",
              [&](sqlite3_stmt* row) { sql += text(row, 0) + "\n"; });
       });
  each("SELECT sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name",
       [&](sqlite3_stmt* index) { sql += text(index, 0) + ";\n"; });
  sqlite3_close(db);
  return sql + "COMMIT;\n";
}

std::string StoreDump(const std::string& scratch_dir) {
  const std::string path = (std::filesystem::path(scratch_dir) / "compat-state.db").string();
  std::filesystem::remove(path);
  {
    auto s = store::SqliteStore::Open(path, {});
    if (!s.ok()) throw std::runtime_error(s.status().ToString());
    if (Status c = (*s)->Commit(StoreRows()); !c.ok()) throw std::runtime_error(c.ToString());
  }
  std::string sql = Dump(path);
  std::filesystem::remove(path);
  return sql;
}

}  // namespace

std::map<std::string, std::string> TodaysRecordings(const std::string& scratch_dir) {
  std::map<std::string, std::string> out;
  AgentMessages(out);
  ServerMessages(out);
  CliRequests(out);
  Answers(out);
  JournalRecords(out);
  out["store.sql"] = StoreDump(scratch_dir);
  return out;
}

}  // namespace gpusched::testing
