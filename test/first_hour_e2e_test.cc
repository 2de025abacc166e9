// The first hour of a new user, through the real binary: what a Slurm or kubectl user expects
// of the everyday commands (issue 18).

#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {

namespace fs = std::filesystem;


// Submitted before any agent registered: no pass counts a failure for want of a node (none
// parks it in FQ for t2), and the first agent's registration places it.
TEST_F(ClusterTest, ATaskSubmittedBeforeAnyAgentRunsOnceOneRegistersWithoutAFailure) {
  const uint64_t id = Submit({"--gpus", "1", "--", "true"});
  std::this_thread::sleep_for(1200ms);  // two t1 periods (500 ms): passes were due meanwhile
  const auto why = [&] { return Json::parse(Run({"why", std::to_string(id), "--json"}).out); };
  const Json waiting = why();
  EXPECT_EQ(waiting["state"], "pending");
  EXPECT_EQ(waiting["queue"], "Q") << waiting.dump();
  EXPECT_EQ(waiting["placement_failures"], 0) << waiting.dump();
  StartAgent("a", "1x16GiB");
  ASSERT_TRUE(WaitState(id, "succeeded"));
  EXPECT_EQ(why()["placement_failures"], 0);
}

TEST_F(ClusterTest, ASecondServerOnAPortInUseIsRefused) {
  const std::string http = "127.0.0.1:" + std::to_string(FreePort());
  CliResult grpc = Cli({"server", "--listen", server(), "--http", http, "--data-dir",
                        path("second")});
  EXPECT_EQ(grpc.code, 1) << grpc.err;
  EXPECT_TRUE(Has(grpc.err, "address already in use")) << grpc.err;
  // gRPC's reason is in our one line; its own line (status tree, file names, times) is not.
  EXPECT_FALSE(Has(grpc.err, "chttp2_server.cc")) << grpc.err;
  EXPECT_FALSE(Has(grpc.err, "{file:")) << grpc.err;
  EXPECT_EQ(std::count(grpc.err.begin(), grpc.err.end(), '\n'), 1) << grpc.err;
  // The HTTP port too.
  CliResult web = Cli({"server", "--listen", "127.0.0.1:" + std::to_string(FreePort()), "--http",
                       "127.0.0.1:" + std::to_string(http_port_), "--data-dir", path("third")});
  EXPECT_EQ(web.code, 1) << web.err;
  EXPECT_TRUE(Has(web.err, "address already in use")) << web.err;
  EXPECT_EQ(Run({"nodes"}).code, 0);  // the first one still serves
}

TEST_F(ClusterTest, TaskRunsInTheSubmitDirectoryWithTheCallersEnvironmentOnRequest) {
  StartAgent("n1", "1x16GiB");
  fs::create_directories(path("proj"));
  WriteFile(path("proj/train.sh"), "echo \"in $(pwd -P) with [$FIRST_HOUR_VAR]\"\n");
  const fs::path before = fs::current_path();
  fs::current_path(path("proj"));
  setenv("FIRST_HOUR_VAR", "hello", 1);
  const uint64_t exported = Submit({"--export", "--", "sh", "train.sh"});
  const uint64_t plain = Submit({"--", "sh", "train.sh"});
  unsetenv("FIRST_HOUR_VAR");
  fs::current_path(before);
  const uint64_t chosen = Submit({"--workdir", path("proj"), "--", "sh", "train.sh"});
  const std::string real = fs::canonical(path("proj")).string();
  for (uint64_t id : {exported, plain, chosen}) ASSERT_TRUE(WaitState(id, "succeeded")) << id;
  EXPECT_EQ(Run({"logs", std::to_string(exported)}).out, "in " + real + " with [hello]\n");
  EXPECT_EQ(Run({"logs", std::to_string(plain)}).out, "in " + real + " with []\n");
  EXPECT_EQ(Run({"logs", std::to_string(chosen)}).out, "in " + real + " with []\n");
  EXPECT_EQ(Task(chosen)["workdir"], path("proj"));
  EXPECT_TRUE(Has(Run({"show", std::to_string(chosen)}).out, path("proj")));
}

// sbatch --array: one request, one task per index, each seeing its index.
TEST_F(ClusterTest, ArraySubmitsOneTaskPerIndexEachWithItsIndex) {
  StartAgent("n1", "2x16GiB");
  CliResult r = Run({"submit", "--array", "3-5", "--name", "sweep", "--json", "--", "sh", "-c",
                     "echo index=$GPUSCHED_ARRAY_INDEX"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json out = Json::parse(r.out);
  ASSERT_EQ(out["ids"].size(), 3u) << out;
  EXPECT_EQ(out["array"]["first"], 3);
  EXPECT_EQ(out["array"]["last"], 5);
  EXPECT_EQ(out["id"], out["ids"][0]);
  for (int i = 0; i < 3; ++i) {
    const uint64_t id = out["ids"][i];
    EXPECT_EQ(id, out["ids"][0].get<uint64_t>() + i) << "ids are consecutive";
    ASSERT_TRUE(WaitState(id, "succeeded")) << id;
    EXPECT_EQ(Run({"logs", std::to_string(id)}).out, "index=" + std::to_string(3 + i) + "\n");
    EXPECT_EQ(Task(id)["name"], "sweep[" + std::to_string(3 + i) + "]");
  }
  // Text output: the array's handle, ID.* (what ls, show, cancel and wait take).
  CliResult text = Run({"submit", "--array", "0-1", "--", "true"});
  ASSERT_EQ(text.code, 0) << text.err;
  const uint64_t last = out["ids"][2];
  EXPECT_EQ(text.out, std::to_string(last + 1) + ".*\n");  // issue 41: the array's handle
  // Bad ranges are usage errors that name the flag and the value; nothing is queued.
  for (const std::string bad : {"5-3", "0-10000", "x", "1-"}) {
    CliResult refused = Run({"submit", "--array", bad, "--", "true"});
    EXPECT_EQ(refused.code, 2) << bad << ": " << refused.err;
    EXPECT_TRUE(Has(refused.err, "--array: \"" + bad + "\"")) << refused.err;
  }
  EXPECT_TRUE(Run({"show", std::to_string(last + 3)}).code != 0) << "a refused array queued";
}

// squeue's contract: `ls` lists each queued or running task once, while tasks move from
// pending to assigned to running to done under it. It listed one state per call and joined
// them, so a task that moved between two calls was listed twice (4 of 5 listings of a
// starting array) or not at all.
TEST_F(ClusterTest, LsListsEveryTaskOnceWhileTheyChangeState) {
  StartAgent("n1", "4x16GiB");
  CliResult r = Run({"submit", "--array", "0-39", "--gpus", "1", "--json", "--", "sleep", "0.2"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json out = Json::parse(r.out);
  const uint64_t first = out["ids"][0], last = out["ids"][39];
  int with_running = 0;
  bool done = false;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    CliResult ls = Run({"ls", "--json"});
    ASSERT_EQ(ls.code, 0) << ls.err;
    std::set<uint64_t> ids;
    bool running = false;
    for (const Json& t : Json::parse(ls.out)) {
      const uint64_t id = t["id"];
      EXPECT_TRUE(ids.insert(id).second) << "task " << id << " listed twice";
      EXPECT_TRUE(id >= first && id <= last) << id;
      running = running || t["state"] == "running";
    }
    with_running += running ? 1 : 0;
    done = ids.empty();  // every task finished
  }
  EXPECT_TRUE(done) << "the array did not finish";
  EXPECT_GT(with_running, 3) << "the listings saw too little of the run to check anything";
}

TEST_F(ClusterTest, TimeLimitStopsTheTaskAndFailsIt) {
  StartAgent("n1", "1x16GiB");
  const uint64_t id = Submit({"--time", "1s", "--", "sleep", "60"});
  ASSERT_TRUE(WaitState(id, "failed"));
  const Json t = Task(id);
  EXPECT_TRUE(Has(t["reason"], "time limit")) << t;
  EXPECT_EQ(t["attempts"], 1);
  EXPECT_EQ(t["request"]["time_limit_ms"], 1000);
}

TEST_F(ClusterTest, LaunchFailuresThatNoRetryCanFixFailAtOnce) {
  StartAgent("n1", "1x16GiB");
  const uint64_t program = Submit({"--", "no-such-program-first-hour"});
  const uint64_t dir = Submit({"--workdir", path("no-such-dir"), "--", "true"});
  ASSERT_TRUE(WaitState(program, "failed"));
  ASSERT_TRUE(WaitState(dir, "failed"));
  EXPECT_EQ(Task(program)["attempts"], 1);
  EXPECT_TRUE(Has(Task(program)["reason"], "not found")) << Task(program);
  EXPECT_EQ(Task(dir)["attempts"], 1);
  EXPECT_TRUE(Has(Task(dir)["reason"], "workdir")) << Task(dir);
}

TEST_F(ClusterTest, ParseErrorsNameTheFlagOrCommandWithADidYouMean) {
  CliResult flag = Run({"submit", "--gpu", "1", "--", "sleep", "8"});
  EXPECT_EQ(flag.code, 2);
  EXPECT_TRUE(Has(flag.err, "unknown flag --gpu; did you mean --gpus?")) << flag.err;
  CliResult cmd = Cli({"sumbit", "--gpus", "1", "--", "true"});
  EXPECT_EQ(cmd.code, 2);
  EXPECT_TRUE(Has(cmd.err, "unknown command \"sumbit\"; did you mean submit?")) << cmd.err;
  CliResult json = Run({"show", "999", "--json"});
  EXPECT_EQ(json.code, 1);
  const Json e = Json::parse(json.err);
  EXPECT_EQ(e["code"], 1);
  EXPECT_TRUE(Has(e["error"], "999")) << json.err;
  CliResult json_usage = Run({"ls", "--state", "done", "--json"});
  EXPECT_EQ(json_usage.code, 2);
  EXPECT_EQ(Json::parse(json_usage.err)["code"], 2) << json_usage.err;
}

// `gpusched --server ADDR ls`, as `kubectl --server` is written: before the command's name,
// over GPUSCHED_SERVER, for the client binary's commands, the whole binary's (status, agent)
// and --server=ADDR alike; a --server after the command's name wins over it.
TEST_F(ClusterTest, TheServerAddressMayComeBeforeTheCommandAndTheCommandsOwnWins) {
  const std::string dead = "127.0.0.1:" + std::to_string(FreePort());  // nobody listens
  const std::map<std::string, std::string> env{{"GPUSCHED_SERVER", dead}};
  CliResult ls = Cli({"--server", server(), "ls", "--json"}, env);
  EXPECT_EQ(ls.code, 0) << ls.err;
  EXPECT_EQ(ls.out.rfind("[", 0), 0u) << ls.out;
  CliResult equals = Cli({"--server=" + server(), "nodes", "--json"}, env);
  EXPECT_EQ(equals.code, 0) << equals.err;
  CliResult status = Cli({"--server", server(), "status", "--json"}, env);
  EXPECT_EQ(status.code, 0) << status.err;
  EXPECT_TRUE(Has(status.out, server())) << status.out;
  // --json before the command, as --server: it read "ls: The following argument was not
  // expected: --json". Commands of two words and ones with arguments take it too.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--json", "--server", server(), "ls"},
        std::vector<std::string>{"--server", server(), "--json", "quota", "ls"},
        std::vector<std::string>{"--json", "--server", server(), "status"}}) {
    CliResult r = Cli(args, env);
    EXPECT_EQ(r.code, 0) << args.back() << ": " << r.err;
    EXPECT_TRUE(Json::accept(r.out)) << args.back() << ": " << r.out;
  }
  CliResult missing_task = Cli({"--json", "show", "999999", "--server", server()});
  EXPECT_EQ(missing_task.code, 1) << missing_task.err;
  EXPECT_EQ(Json::parse(missing_task.err)["code"], 1) << missing_task.err;  // a JSON error
  // The command's own flag wins, whichever of the two is the unreachable one.
  CliResult own = Cli({"--server", dead, "nodes", "--server", server()});
  EXPECT_EQ(own.code, 0) << own.err;
  CliResult own_dead = Cli({"--server", server(), "nodes", "--server", dead});
  EXPECT_EQ(own_dead.code, 3) << own_dead.err;
  EXPECT_TRUE(Has(own_dead.err, dead)) << own_dead.err;
  // A missing value is a usage error that names the flag.
  CliResult missing = Cli({"ls", "--server"});
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_TRUE(Has(missing.err, "--server")) << missing.err;
  // An agent started as `gpusched --server ADDR agent ...` registers there.
  Proc agent({"--server", server(), "agent", "--name", "early", "--gpus", "1x16GiB", "--simulate",
              "--data-dir", path("early")},
             path("early.log"));
  EXPECT_TRUE(PollUntil(
      [&] {
        for (const Json& n : Json::parse(Run({"nodes", "--json"}).out)) {
          if (n["name"] == "early" && n["connected"] == true) return true;
        }
        return false;
      },
      kDeadline))
      << agent.Log();
}

// An agent pointed at an address where no server listens says so (once per reason, not at
// every retry) instead of waiting in silence.
TEST_F(ClusterTest, AnAgentThatCannotReachItsServerSaysSoOnce) {
  const std::string nobody = "127.0.0.1:" + std::to_string(FreePort());
  Proc agent({"agent", "--server", nobody, "--name", "lost", "--gpus", "1x16GiB", "--simulate",
              "--data-dir", path("lost")},
             path("lost.log"));
  const std::string said = "cannot reach " + nobody + ": ";
  ASSERT_TRUE(PollUntil([&] { return Has(agent.Log(), said); }, kDeadline)) << agent.Log();
  std::this_thread::sleep_for(3s);  // about three more retries
  const std::string log = agent.Log();
  EXPECT_EQ(log.find(said), log.rfind(said)) << log;
  EXPECT_TRUE(Has(log, "retrying")) << log;
}

TEST_F(ClusterTest, GbSizesRepeatedStateSeveralCancelsAndLogsOfATaskThatNeverRan) {
  StartAgent("n1", "1x16GiB");
  const uint64_t gb = Submit({"--gpu-mem", "6GB", "--", "true"});
  EXPECT_EQ(Task(gb)["request"]["gpu_mem_mib"], 5722);
  const uint64_t a = Submit({"--gpus", "9", "--keep-pending", "--", "true"});
  const uint64_t b = Submit({"--gpus", "9", "--keep-pending", "--", "true"});
  const uint64_t c = Submit({"--gpus", "9", "--keep-pending", "--", "true"});
  ASSERT_TRUE(WaitState(gb, "succeeded"));
  CliResult never = Run({"logs", std::to_string(a)});
  EXPECT_EQ(never.code, 1);
  EXPECT_TRUE(Has(never.err, "never ran")) << never.err;
  CliResult two = Run({"cancel", std::to_string(a), std::to_string(b)});
  EXPECT_EQ(two.code, 0) << two.err;
  EXPECT_EQ(Task(a)["state"], "cancelled");
  EXPECT_EQ(Task(b)["state"], "cancelled");
  CliResult by_state = Run({"cancel", "--state", "pending"});
  EXPECT_EQ(by_state.code, 0) << by_state.err;
  EXPECT_EQ(Task(c)["state"], "cancelled");
  CliResult ls = Run({"ls", "--state", "succeeded", "--state", "cancelled", "--json"});
  ASSERT_EQ(ls.code, 0) << ls.err;
  EXPECT_EQ(Json::parse(ls.out).size(), 4u);
  EXPECT_EQ(Json::parse(Run({"ls", "--state", "cancelled,succeeded", "--json"}).out).size(), 4u);
}

TEST_F(ClusterTest, LsShowsActiveTasksByDefaultAndShowTheRequestAndTimes) {
  StartAgent("n1", "1x16GiB");
  const uint64_t done = Submit({"--", "true"});
  ASSERT_TRUE(WaitState(done, "succeeded"));
  const uint64_t run = Submit({"--gpus", "1", "--cpu", "2", "--mem", "1GiB", "--duration", "1h",
                               "--retries", "1", "--name", "r", "--", "sh", "-c",
                               Gated("ls", "true")});
  ASSERT_TRUE(WaitState(run, "running"));
  const Json active = Json::parse(Run({"ls", "--json"}).out);
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0]["id"], run);
  EXPECT_EQ(Json::parse(Run({"ls", "--all", "--json"}).out).size(), 2u);
  const Json r = active[0]["request"];
  EXPECT_EQ(r["gpus"], 1);
  EXPECT_EQ(r["cpu_milli"], 2000);
  EXPECT_EQ(r["mem_mib"], 1024);
  EXPECT_EQ(r["duration_ms"], 3'600'000);
  EXPECT_EQ(r["retries"], 1);
  EXPECT_GT(active[0]["started_ms"].get<int64_t>(), 0);
  CliResult ls = Run({"ls"});
  EXPECT_TRUE(Has(ls.out, "SUBMITTED") && Has(ls.out, "ELAPSED")) << ls.out;
  CliResult show = Run({"show", std::to_string(run)});
  for (const char* needle : {"request:", "1 GPU (whole), 2 CPU, 1GiB RAM, expected 1h, 1 retry",
                             "workdir:", "started:", "elapsed:"}) {
    EXPECT_TRUE(Has(show.out, needle)) << needle << "\n" << show.out;
  }
  EXPECT_FALSE(Has(show.out, "Pt ")) << show.out;  // the patents' words: --verbose only
  EXPECT_TRUE(Has(Run({"show", "-v", std::to_string(run)}).out, "Pt "));
  OpenGate("ls");
  ASSERT_TRUE(WaitState(run, "succeeded"));
  EXPECT_GT(Task(run)["elapsed_ms"].get<int64_t>(), 0);
}

TEST_F(ClusterTest, FlagsWithAFileFillOnlyWhatTheFileLeavesOut) {
  StartAgent("n1", "1x16GiB");
  WriteFile(path("job.yaml"), "name: from-file\ngpus: 1\ncommand: [\"true\"]\n");
  CliResult clash = Run({"submit", "-f", path("job.yaml"), "--gpus", "2"});
  EXPECT_EQ(clash.code, 2);
  EXPECT_TRUE(Has(clash.err, "--gpus: " + path("job.yaml") + " sets gpus already")) << clash.err;
  CliResult cmd = Run({"submit", "-f", path("job.yaml"), "--", "false"});
  EXPECT_EQ(cmd.code, 2);
  EXPECT_TRUE(Has(cmd.err, "sets command already")) << cmd.err;
  const uint64_t id = Submit({"-f", path("job.yaml"), "--time", "10m"});
  const Json t = Task(id);
  EXPECT_EQ(t["name"], "from-file");
  EXPECT_EQ(t["request"]["time_limit_ms"], 600'000);
  // The example in the docs parses and runs as written.
  CliResult example = Run({"submit", "-f", GPUSCHED_SOURCE_DIR "/examples/job.yaml"});
  EXPECT_EQ(example.code, 0) << example.err;
}

}  // namespace
}  // namespace gpusched::testing

namespace gpusched::testing {
namespace {

TEST_F(ClusterTest, DrainLetsRunningTasksFinishAndWhyNamesTheNeedForWholeGpus) {
  StartAgent("n1", "2x16GiB");
  const uint64_t one = Submit({"--gpus", "1", "--", "sh", "-c", Gated("drain", "true")});
  ASSERT_TRUE(WaitState(one, "running"));
  const uint64_t two = Submit({"--gpus", "2", "--", "true"});
  ASSERT_TRUE(PollUntil([&] { return Has(Run({"why", std::to_string(two)}).out, "needs"); },
                        kDeadline));
  CliResult why = Run({"why", std::to_string(two)});
  EXPECT_TRUE(Has(why.out, "needs 2 free GPUs on one node; n1 has 1")) << why.out;
  EXPECT_TRUE(Has(why.out, "too few free GPUs")) << why.out;
  EXPECT_FALSE(Has(why.out, "insufficient GPU memory")) << why.out;
  EXPECT_FALSE(Has(why.out, "Pt ")) << why.out;  // --verbose only
  CliResult cancel = Run({"cancel", std::to_string(two)});
  ASSERT_EQ(cancel.code, 0) << cancel.err;
  CliResult drain = Run({"drain", "n1"});
  EXPECT_EQ(drain.code, 0) << drain.err;
  EXPECT_TRUE(Has(drain.out, "node n1 draining")) << drain.out;
  EXPECT_TRUE(Has(Run({"nodes"}).out, "draining"));
  EXPECT_EQ(Task(one)["state"], "running");  // not killed
  OpenGate("drain");
  ASSERT_TRUE(WaitState(one, "succeeded"));
  EXPECT_EQ(Task(one)["attempts"], 1);
  EXPECT_TRUE(PollUntil([&] { return Has(Run({"nodes"}).out, "drained"); }, kDeadline));
}

}  // namespace
}  // namespace gpusched::testing

namespace gpusched::testing {
namespace {

// The lines of the first ```sh block after the marker in `file` (of the source tree),
// comments dropped.
std::vector<std::string> ExamplesOf(const std::string& file) {
  const std::string text = ReadFile(std::string(GPUSCHED_SOURCE_DIR "/") + file);
  const size_t marker = text.find("<!-- test/first_hour_e2e_test.cc runs every line");
  EXPECT_NE(marker, std::string::npos) << file << " has no block marked for this test";
  const size_t start = text.find("```sh\n", marker);
  const size_t end = text.find("```", start + 6);
  std::vector<std::string> lines;
  std::istringstream in(text.substr(start + 6, end - start - 6));
  for (std::string line; std::getline(in, line);) {
    const size_t comment = line.find("  #");
    if (comment != std::string::npos) line.resize(comment);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// Starts the cluster the block's first line starts (on free ports here, since 7070 may be
// taken), runs every other line in the source tree as a shell would, each expected to exit 0,
// then `after(server)` while the cluster still runs.
void RunAsWritten(const std::vector<std::string>& lines,
                  const std::function<void(const std::string&)>& after) {
  ASSERT_GE(lines.size(), 3u);
  ASSERT_EQ(lines[0], "gpusched dev --agents 2 --gpus 4x16GiB &");
  const fs::path dir = fs::temp_directory_path() / ("gpusched_readme_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string server = "127.0.0.1:" + std::to_string(FreePort());
  Proc dev({"dev", "--agents", "2", "--gpus", "4x16GiB", "--listen", server, "--http",
            "127.0.0.1:" + std::to_string(FreePort()), "--data-dir", (dir / "data").string()},
           (dir / "dev.log").string());
  ASSERT_TRUE(PollUntil(
      [&] {
        CliResult r = Cli({"nodes", "--json", "--server", server});
        return r.code == 0 && Json::parse(r.out).size() == 2;
      },
      kDeadline))
      << ReadFile((dir / "dev.log").string());
  const std::string bin_dir = fs::path(GPUSCHED_BIN).parent_path().string();
  const std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "/usr/bin:/bin";
  setenv("PATH", (bin_dir + ":" + path).c_str(), 1);
  setenv("GPUSCHED_SERVER", server.c_str(), 1);
  const fs::path before = fs::current_path();
  fs::current_path(GPUSCHED_SOURCE_DIR);
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string out = (dir / "out").string();
    const int status = std::system((lines[i] + " >" + out + " 2>&1").c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << lines[i] << "\n" << ReadFile(out);
  }
  fs::current_path(before);
  setenv("PATH", path.c_str(), 1);
  unsetenv("GPUSCHED_SERVER");
  after(server);
  dev.Kill(SIGTERM);
  fs::remove_all(dir);
}

TEST(Readme, EveryExampleRunsAsWritten) {
  RunAsWritten(ExamplesOf("README.md"), [](const std::string& server) {
    CliResult logs = Cli({"logs", "1", "--server", server});
    EXPECT_TRUE(Has(logs.out, "training on GPUs")) << logs.out << logs.err;
  });
}

// Issue 41: the scripted pipeline of docs/job-spec.md ("Waiting, how tasks end, and naming
// many tasks") runs as written, and ends as its comments say.
TEST(Readme, Issue41_TheJobSpecsPipelineRunsAsWritten) {
  RunAsWritten(ExamplesOf("docs/job-spec.md"), [](const std::string& server) {
    CliResult failed = Cli({"ls", "1.*", "--state", "failed", "--json", "--server", server});
    ASSERT_EQ(failed.code, 0) << failed.err;
    const Json tasks = Json::parse(failed.out);
    ASSERT_EQ(tasks.size(), 4u) << failed.out;  // indices 1, 2, 4, 5 of 0-5
    for (const Json& t : tasks) EXPECT_EQ(t["failure"], "exit") << t;
  });
}

}  // namespace
}  // namespace gpusched::testing

namespace gpusched::testing {
namespace {

TEST(Sim, ATraceInAnotherFormatSaysWhichFormatItReadsAs) {
  const std::string trace =
      (std::filesystem::temp_directory_path() / ("gpusched_sim_" + std::to_string(getpid()) +
                                                 ".csv"))
          .string();
  WriteFile(trace, "job_id,num_gpu,submit_time,duration\n1,1,0,60\n2,2,10,120\n");
  CliResult wrong = Cli({"sim", "--trace", trace, "--format", "philly", "--cluster", "2x8",
                         "--no-progress"});
  EXPECT_EQ(wrong.code, 2);
  EXPECT_NE(wrong.err.find("use --format csv"), std::string::npos) << wrong.err;
  const std::string out = trace + ".out";
  CliResult right = Cli({"sim", "--trace", trace, "--cluster", "2x8", "--no-progress", "--json",
                         "--out", out});
  EXPECT_EQ(right.code, 0) << right.err;
  // No task waited: the plot has no (empty) queue axis.
  const std::string plots = ReadFile(out + "/plots.gp");
  EXPECT_NE(plots.find("no task waited"), std::string::npos) << plots;
  EXPECT_EQ(plots.find("y2label"), std::string::npos) << plots;
  // Bad arguments are refused before the replay: an --out that is a file failed only after
  // the whole run (its results printed), a directory as the trace read as "empty file", and
  // --synthetic beside --trace ignored the trace.
  CliResult file_out = Cli({"sim", "--trace", trace, "--cluster", "2x8", "--no-progress",
                            "--json", "--out", trace});
  EXPECT_EQ(file_out.code, 1) << file_out.err;
  EXPECT_EQ(file_out.out, "") << "the run went ahead";
  EXPECT_NE(file_out.err.find("out: cannot create the directory " + trace), std::string::npos)
      << file_out.err;
  CliResult dir = Cli({"sim", "--trace", out, "--no-progress"});
  EXPECT_EQ(dir.code, 2) << dir.err;
  EXPECT_NE(dir.err.find("is a directory, not a trace file"), std::string::npos) << dir.err;
  for (const std::vector<std::string>& both :
       {std::vector<std::string>{"sim", "--synthetic", "10", "--trace", trace},
        std::vector<std::string>{"sim", "--synthetic", "0"}}) {
    CliResult r = Cli(both);
    EXPECT_EQ(r.code, 2) << both[2] << ": " << r.err;
    EXPECT_NE(r.err.find("--synthetic"), std::string::npos) << r.err;
  }
  std::filesystem::remove(trace);
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace gpusched::testing
