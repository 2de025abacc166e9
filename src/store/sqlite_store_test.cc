#include "store/sqlite_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "store/record_codec.h"

namespace gpusched::store {
namespace {

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpusched_store_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<SqliteStore> Open() {
    auto s = SqliteStore::Open((dir_ / "state.db").string(), {});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  std::filesystem::path dir_;
};

TaskRecord RunningTask(uint64_t id) {
  TaskRecord r;
  core::Task& t = r.task;
  t.id = TaskId(id);
  t.spec.name = "t" + std::to_string(id);
  t.spec.gpus = 1;
  t.spec.gpu_mem_mib = 6144;
  t.spec.command = {"sh", "-c", "echo hi"};
  t.spec.env = {{"A", "1"}};
  t.spec.max_retries = 2;
  t.spec.profile = core::MemoryProfile{"classify", "resnet50", 32, 224, 224};
  t.spec.tolerations.push_back({"gpu", "", true, false, core::TaintEffect::kNoSchedule});
  t.state = core::TaskState::kRunning;
  t.st = 13;
  t.pt = 4;
  t.seq = id;
  t.attempts = 2;
  t.fail_cnt = 1;
  t.exit_code = 3;
  core::Placement p;
  p.node = "n1";
  p.gpus = {2};
  p.gpu_mem_mib = {6144};
  p.resources = {1000, 2048};
  t.placement = p;
  r.last_placement = p;
  t.history.push_back({5, core::TaskState::kPending, "submitted"});
  return r;
}

TEST_F(SqliteStoreTest, TasksSurviveReopenWithEveryField) {
  {
    auto s = Open();
    ASSERT_TRUE(s->PutTasks({RunningTask(1), RunningTask(2)}).ok());
    TaskRecord changed = RunningTask(1);
    changed.task.state = core::TaskState::kSucceeded;
    ASSERT_TRUE(s->PutTasks({changed}).ok());  // replaces, does not duplicate
  }
  auto s = Open();
  auto tasks = s->LoadTasks();
  ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
  ASSERT_EQ(tasks->size(), 2u);
  EXPECT_EQ((*tasks)[0].task.state, core::TaskState::kSucceeded);
  const TaskRecord& r = (*tasks)[1];
  EXPECT_EQ(EncodeTask(r), EncodeTask(RunningTask(2)));
  EXPECT_EQ(r.task.placement->gpus, std::vector<int>{2});
  EXPECT_EQ(r.task.spec.profile->model, "resnet50");
  EXPECT_EQ(r.task.exit_code, 3);
}

// EncodeTask writes JSON by hand; its text must be exactly nlohmann's canonical dump of the
// same document (sorted keys, same escapes), so rows read the same whichever wrote them.
TEST(RecordCodecTest, TaskTextIsCanonicalJson) {
  TaskRecord r = RunningTask(7);
  r.task.spec.name = "quote\" back\\ nl\n tab\t ctl\x01 utf8 \xc3\xa9 del\x7f";
  r.task.spec.command = {"sh", "-c", "printf '%s\\n' \"$X\""};
  r.task.spec.env = {{"B", "2"}, {"A", ""}, {"Z\"", "\\"}};
  r.task.spec.node_selector = {{"zone", "a"}};
  r.task.spec.duration_ms = 1000;
  r.task.mem_source = "explicit";
  r.task.reason = "assigned to n1";
  r.task.last_report_summary = "placed on n1 (score 81.2: LeastAllocated 75.0)";
  r.task.history.push_back({-3, core::TaskState::kRunning, ""});
  for (const TaskRecord& rec : {r, RunningTask(1), TaskRecord{}}) {
    const std::string text = EncodeTask(rec);
    EXPECT_EQ(nlohmann::json::parse(text).dump(), text);
    auto back = DecodeTask(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(EncodeTask(*back), text);
  }
  EXPECT_EQ(DecodeTask(EncodeTask(r))->task.spec.name, r.task.spec.name);
}

TEST_F(SqliteStoreTest, NodesAndMemoryPeaksSurviveReopen) {
  {
    auto s = Open();
    NodeRecord n;
    n.spec.name = "n1";
    n.spec.address = "127.0.0.1:1";
    n.spec.gpus = {{"A100", 81920}};
    n.cordoned = true;
    ASSERT_TRUE(s->PutNode(n).ok());
    ASSERT_TRUE(s->AddMemoryObservation({{"classify", "resnet50", 32, 224, 224}, 5000}).ok());
  }
  auto s = Open();
  auto nodes = s->LoadNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_TRUE((*nodes)[0].cordoned);
  EXPECT_EQ((*nodes)[0].spec.gpus[0].total_mib, 81920);
  auto peaks = s->LoadMemoryObservations();
  ASSERT_TRUE(peaks.ok());
  ASSERT_EQ(peaks->size(), 1u);
  EXPECT_EQ((*peaks)[0].peak_mib, 5000);
  EXPECT_EQ((*peaks)[0].profile.batch, 32);
}

TEST_F(SqliteStoreTest, CorruptRowIsDataLossNotACrash) {
  EXPECT_EQ(DecodeTask("{not json").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeTask("{\"v\":1}").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeNode("[]").status().code(), StatusCode::kDataLoss);
}

TEST_F(SqliteStoreTest, UnwritablePathNamesThePath) {
  auto s = SqliteStore::Open((dir_ / "missing" / "x.db").string(), {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("missing"), std::string::npos);
}

}  // namespace
}  // namespace gpusched::store
