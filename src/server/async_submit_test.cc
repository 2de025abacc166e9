// Submit on the completion queue (AsyncSubmit) through a real server: its gRPC port, its
// SQLite store and its scheduling loop. What a client is answered must match what is stored,
// concurrently and across a shutdown.

#include "server/async_submit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "base/testing/test_dir.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "rpc/channel.h"
#include "server/server.h"

namespace gpusched::server {
namespace {

using namespace std::chrono_literals;

class AsyncSubmitTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("no_proxy", "127.0.0.1,localhost", 1); }

  void StartServer() {
    ServerConfig c = config_;
    c.listen = "127.0.0.1:0";
    c.data_dir = dir_.path().string();
    auto s = Server::Start(c);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    stub_ = v1::Scheduler::NewStub(rpc::MakeChannel(server_->address()));
  }
  static v1::SubmitRequest Request(int gpus = 1) {
    v1::SubmitRequest r;
    r.mutable_spec()->set_gpus(gpus);
    r.mutable_spec()->add_command("true");
    return r;
  }
  grpc::Status Submit(const v1::SubmitRequest& req, v1::SubmitResponse* resp,
                      const std::string& token = "") {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    return stub_->Submit(&ctx, req, resp);
  }
  // Every task id the store holds (the server is restarted over the same directory).
  std::set<uint64_t> StoredIds() {
    server_->Shutdown();
    server_.reset();
    StartServer();
    std::set<uint64_t> ids;
    v1::ListTasksRequest req;
    req.set_limit(10'000);
    grpc::ClientContext ctx;
    v1::ListTasksResponse resp;
    const grpc::Status s = stub_->ListTasks(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    for (const v1::Task& t : resp.tasks()) ids.insert(t.id());
    return ids;
  }

  gpusched::testing::TestDir dir_{"gpusched_async_submit_test"};
  ServerConfig config_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
};

TEST_F(AsyncSubmitTest, ConcurrentSubmissionsAreEachAnsweredWithADistinctStoredId) {
  StartServer();
  constexpr int kClients = 8, kEach = 100;
  std::mutex mu;
  std::vector<uint64_t> ids;
  std::vector<std::string> errors;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        v1::SubmitResponse resp;
        const grpc::Status s = Submit(Request(), &resp);
        std::lock_guard<std::mutex> lock(mu);
        if (s.ok()) {
          ids.push_back(resp.id());
        } else {
          errors.push_back(s.error_message());
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_TRUE(errors.empty()) << errors.front();
  const std::set<uint64_t> distinct(ids.begin(), ids.end());
  EXPECT_EQ(distinct.size(), ids.size()) << "one id answered twice";
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kClients * kEach));
  EXPECT_EQ(StoredIds(), distinct);
}

// A key or an array goes the synchronous way (a worker thread): same answers as before.
TEST_F(AsyncSubmitTest, KeyedRetriesAndArraysAreAnsweredLikeTheSynchronousSubmit) {
  StartServer();
  v1::SubmitRequest keyed = Request();
  keyed.set_idempotency_key("k-1");
  v1::SubmitResponse first, retry;
  ASSERT_TRUE(Submit(keyed, &first).ok());
  ASSERT_TRUE(Submit(keyed, &retry).ok());
  EXPECT_EQ(retry.id(), first.id()) << "a retry with the same key created another task";
  v1::SubmitRequest array = Request();
  array.mutable_array()->set_first(0);
  array.mutable_array()->set_last(2);
  v1::SubmitResponse arr;
  ASSERT_TRUE(Submit(array, &arr).ok());
  ASSERT_EQ(arr.ids_size(), 3);
  EXPECT_EQ(arr.id(), arr.ids(0));
  EXPECT_EQ(arr.ids(1), arr.ids(0) + 1);
  EXPECT_EQ(arr.ids(2), arr.ids(0) + 2);
  EXPECT_EQ(StoredIds(), (std::set<uint64_t>{first.id(), arr.ids(0), arr.ids(1), arr.ids(2)}));
}

TEST_F(AsyncSubmitTest, BadSpecIsRefusedNamingTheFieldAndNothingIsStored) {
  StartServer();
  v1::SubmitResponse resp;
  const grpc::Status s = Submit(Request(/*gpus=*/-1), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("gpus"), std::string::npos) << s.error_message();
  EXPECT_TRUE(StoredIds().empty());
}

TEST_F(AsyncSubmitTest, WithTokensASubmissionWithoutOneIsRefused) {
  config_.auth = "token";
  StartServer();
  v1::SubmitResponse resp;
  EXPECT_EQ(Submit(Request(), &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Submit(Request(), &resp, "not-a-token").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

// Clients submit while the server shuts down: every call ends (none hangs), and every id a
// client was given is stored.
TEST_F(AsyncSubmitTest, ShutdownWhileSubmittingLosesNoAcknowledgedTask) {
  StartServer();
  std::atomic<bool> go{true};
  std::mutex mu;
  std::set<uint64_t> acknowledged;
  std::atomic<int> refused{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&] {
      while (go) {
        v1::SubmitResponse resp;
        const grpc::Status s = Submit(Request(), &resp);
        if (s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          acknowledged.insert(resp.id());
        } else {
          ++refused;
        }
      }
    });
  }
  std::this_thread::sleep_for(300ms);
  server_->Shutdown();
  std::this_thread::sleep_for(100ms);  // calls after the shutdown are refused at once
  go = false;
  for (auto& t : clients) t.join();
  EXPECT_GT(acknowledged.size(), 0u) << "no submission was answered before the shutdown";
  EXPECT_GT(refused.load(), 0) << "no call met the shutdown";
  const std::set<uint64_t> stored = StoredIds();
  for (uint64_t id : acknowledged) {
    EXPECT_TRUE(stored.count(id)) << "task " << id << " was acknowledged but is not stored";
  }
}

}  // namespace
}  // namespace gpusched::server
