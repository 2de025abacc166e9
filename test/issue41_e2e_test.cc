// Issue 41, "the second week", through the real binaries: `submit --wait` and `wait` with
// their exit codes, `logs -f` ending with the task's outcome, the `failure` field (ls, show,
// JSON, acct --by failure), job arrays as one handle (ARRAY.*), id ranges, --name/--user/
// --node filters, `logs --attempt N` after a retry, `quota rm`, and the everyday words.

#include <csignal>
#include <thread>

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {

class Issue41Test : public ClusterTest {
 protected:
  // `submit ARGS` through the CLI; its result (the id on the first line of stdout).
  CliResult SubmitRaw(std::vector<std::string> args) {
    args.insert(args.begin(), "submit");
    return Run(args);
  }
  static uint64_t FirstId(const std::string& out) { return std::stoull(out); }
  // `quota SUB ARGS`: --server goes after the subcommand (Run puts it after the first word).
  CliResult Quota(std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"--server", server()});
    args.insert(args.begin(), "quota");
    return Cli(args);
  }
};

TEST_F(Issue41Test, Issue41_SubmitWaitExitsWithTheTasksOwnOutcome) {
  StartAgent("n1", "1x16GiB");
  CliResult ok = SubmitRaw({"--wait", "--", "true"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  const uint64_t ok_id = FirstId(ok.out);  // the id first, as a plain submit prints it
  EXPECT_EQ(Task(ok_id)["state"], "succeeded");

  CliResult seven = SubmitRaw({"--wait", "--retries", "0", "--", "sh", "-c", "exit 7"});
  EXPECT_EQ(seven.code, 7) << seven.err;
  EXPECT_TRUE(Has(seven.err, "failed (exit): exited with code 7")) << seven.err;

  // A time limit ends it without an exit code of its own: 1, with the reason.
  CliResult limit = SubmitRaw({"--wait", "--time", "1s", "--", "sleep", "60"});
  EXPECT_EQ(limit.code, 1) << limit.err;
  EXPECT_TRUE(Has(limit.err, "failed (timeout): time limit 1s reached on n1")) << limit.err;

  // --json: one document, the final task.
  CliResult json = SubmitRaw({"--wait", "--json", "--retries", "0", "--", "sh", "-c", "exit 3"});
  EXPECT_EQ(json.code, 3) << json.err;
  const Json t = Json::parse(json.out);
  EXPECT_EQ(t["state"], "failed");
  EXPECT_EQ(t["failure"], "exit");
  EXPECT_EQ(t["exit_code"], 3);
}

TEST_F(Issue41Test, Issue41_WaitNamesTasksByIdRangeAndArrayAndGivesUpAtItsTimeout) {
  StartAgent("n1", "2x16GiB");
  CliResult arr = SubmitRaw({"--array", "0-2", "--name", "sweep", "--", "sh", "-c",
                             Gated("a", "exit $GPUSCHED_ARRAY_INDEX")});
  ASSERT_EQ(arr.code, 0) << arr.err;
  const uint64_t first = FirstId(arr.out);
  EXPECT_EQ(arr.out, std::to_string(first) + ".*\n");  // the array's handle
  const std::string handle = std::to_string(first) + ".*";

  // Not ended within --timeout: 124, and the tasks run on.
  CliResult early = Run({"wait", handle, "--timeout", "1s"});
  EXPECT_EQ(early.code, 124) << early.err;
  EXPECT_TRUE(Has(early.err, "3 tasks not finished (they run on)")) << early.err;
  EXPECT_NE(Task(first)["state"], "cancelled");

  OpenGate("a");
  CliResult all = Run({"wait", handle, "--json"});
  // Index 0 exited 0; the first (by id) that did not is index 1, exit 1.
  EXPECT_EQ(all.code, 1) << all.err;
  const Json done = Json::parse(all.out);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0]["state"], "succeeded");
  EXPECT_EQ(done[2]["exit_code"], 2);
  EXPECT_EQ(done[1]["array"]["id"], first);
  EXPECT_EQ(done[1]["array"]["index"], 1);
  // One index of the array, a range, a single id: each names what it says.
  EXPECT_EQ(Run({"wait", std::to_string(first) + ".0"}).code, 0);
  EXPECT_EQ(Run({"wait", std::to_string(first + 2)}).code, 2);
  CliResult range = Run({"wait", std::to_string(first) + "-" + std::to_string(first + 1)});
  EXPECT_EQ(range.code, 1);
  EXPECT_EQ(range.out, "task " + std::to_string(first) + " succeeded\ntask " +
                           std::to_string(first + 1) + " failed (exit): " +
                           Task(first + 1)["reason"].get<std::string>() + "\n");
  // Bad handles are usage errors naming the text; a task that is no array's first says so.
  CliResult bad = Run({"wait", "x.*"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(Has(bad.err, "id: \"x.*\"")) << bad.err;
  CliResult middle = Run({"wait", std::to_string(first + 1) + ".*"});
  EXPECT_EQ(middle.code, 2);
  EXPECT_TRUE(Has(middle.err, "belongs to array " + std::to_string(first))) << middle.err;
}

// Ctrl-C ends the waiting, never the task, and says so.
TEST_F(Issue41Test, Issue41_CtrlCWhileWaitingLeavesTheTaskRunning) {
  StartAgent("n1", "1x16GiB");
  const uint64_t id = Submit({"--", "sh", "-c", Gated("w", "true")});
  ASSERT_TRUE(WaitState(id, "running"));
  Proc wait({"wait", "--server", server(), std::to_string(id)}, path("wait.log"));
  std::this_thread::sleep_for(1s);  // past its first poll: waiting
  wait.Signal(SIGINT);
  EXPECT_EQ(wait.Wait(), 130);
  EXPECT_TRUE(Has(ReadFile(path("wait.log")), "stopped waiting; the tasks run on (gpusched "
                                               "cancel " + std::to_string(id) + " stops them)"))
      << ReadFile(path("wait.log"));
  EXPECT_EQ(Task(id)["state"], "running");
  OpenGate("w");
  EXPECT_EQ(Run({"wait", std::to_string(id)}).code, 0);
}

TEST_F(Issue41Test, Issue41_ArrayCancelAndRangeCancelLeaveOthersAlone) {
  StartAgent("n1", "1x16GiB");
  CliResult arr = SubmitRaw({"--array", "0-3", "--gpus", "1", "--", "sleep", "60"});
  ASSERT_EQ(arr.code, 0) << arr.err;
  const uint64_t first = FirstId(arr.out);
  const uint64_t other = Submit({"--name", "keep", "--", "sleep", "60"});
  CliResult cancel = Run({"cancel", std::to_string(first) + ".*"});
  ASSERT_EQ(cancel.code, 0) << cancel.err;
  for (uint64_t id = first; id < first + 4; ++id) {
    EXPECT_TRUE(Has(cancel.out, "task " + std::to_string(id) + " cancelled")) << cancel.out;
    const Json t = Task(id);
    EXPECT_EQ(t["state"], "cancelled");
    EXPECT_EQ(t["failure"], "cancelled");
  }
  EXPECT_NE(Task(other)["state"], "cancelled");
  // A range over ended and live tasks: the live ones are cancelled, the rest left alone.
  CliResult range = Run({"cancel", std::to_string(first) + "-" + std::to_string(other)});
  EXPECT_EQ(range.code, 0) << range.err;
  EXPECT_EQ(range.out, "task " + std::to_string(other) + " cancelled\n");
  EXPECT_TRUE(Has(range.err, "4 tasks that already ended")) << range.err;
  // Named by its own id, an ended task is still an error, in words.
  CliResult again = Run({"cancel", std::to_string(other)});
  EXPECT_EQ(again.code, 1);
  EXPECT_TRUE(Has(again.err, "task " + std::to_string(other) + " was already cancelled"))
      << again.err;
  // ls of the array, in the state column with its failure.
  CliResult ls = Run({"ls", std::to_string(first) + ".*"});
  ASSERT_EQ(ls.code, 0) << ls.err;
  EXPECT_TRUE(Has(ls.out, "cancelled")) << ls.out;
  EXPECT_EQ(Json::parse(Run({"ls", std::to_string(first) + ".*", "--json"}).out).size(), 4u);
}

TEST_F(Issue41Test, Issue41_LsAndCancelFilterByNameUserAndNode) {
  StartAgent("n1", "1x16GiB", {"--label", "host=n1"});
  StartAgent("n2", "1x16GiB", {"--label", "host=n2"});
  const uint64_t on1 = Submit({"--name", "etl", "--selector", "host=n1", "--", "sleep", "60"});
  const uint64_t on2 = Submit({"--name", "etl", "--selector", "host=n2", "--", "sleep", "60"});
  CliResult arr = SubmitRaw({"--array", "0-1", "--name", "etl", "--selector", "host=n2", "--",
                             "sleep", "60"});
  ASSERT_EQ(arr.code, 0) << arr.err;
  const uint64_t first = FirstId(arr.out);
  const uint64_t other = Submit({"--name", "etl2", "--selector", "host=n1", "--", "sleep", "60"});
  for (uint64_t id : {on1, on2, first, first + 1, other}) ASSERT_TRUE(WaitState(id, "running"));
  const auto ids = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "ls");
    args.push_back("--json");
    CliResult r = Run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<uint64_t> out;
    for (const Json& t : Json::parse(r.out)) out.push_back(t["id"].get<uint64_t>());
    return out;
  };
  // NAME matches itself and an array's NAME[i]; never another name that starts with it.
  EXPECT_EQ(ids({"--name", "etl"}), (std::vector<uint64_t>{on1, on2, first, first + 1}));
  EXPECT_EQ(ids({"--node", "n1"}), (std::vector<uint64_t>{on1, other}));
  EXPECT_EQ(ids({"--name", "etl", "--node", "n2"}),
            (std::vector<uint64_t>{on2, first, first + 1}));
  EXPECT_EQ(ids({"--user", "nobody-by-this-name"}), std::vector<uint64_t>{});
  const std::string me = Task(on1)["user"];
  EXPECT_EQ(ids({"--user", me}).size(), 5u);
  EXPECT_EQ(ids({"--team", "default"}).size(), 5u);
  // REST lists by the same rule.
  const Json rest = Json::parse(HttpGet(http_port_, "/api/v1/tasks?name=etl&node=n2"));
  std::vector<uint64_t> rest_ids;
  for (const Json& t : rest["tasks"]) rest_ids.push_back(t["id"].get<uint64_t>());
  EXPECT_EQ(rest_ids, (std::vector<uint64_t>{on2, first, first + 1})) << rest;
  // show takes the same filters: an array of every match.
  CliResult show = Run({"show", "--name", "etl", "--node", "n1", "--json"});
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_EQ(Json::parse(show.out).size(), 1u) << show.out;
  // cancel --name: its live tasks, nothing else.
  CliResult cancel = Run({"cancel", "--name", "etl", "--node", "n2"});
  ASSERT_EQ(cancel.code, 0) << cancel.err;
  for (uint64_t id : {on2, first, first + 1}) EXPECT_EQ(Task(id)["state"], "cancelled");
  for (uint64_t id : {on1, other}) EXPECT_EQ(Task(id)["state"], "running");
}

TEST_F(Issue41Test, Issue41_LogsAttemptReadsAnEarlierAttemptAndFollowEndsWithTheOutcome) {
  StartAgent("n1", "1x16GiB");
  const uint64_t id = Submit({"--retries", "1", "--", "sh", "-c",
                              "echo run $GPUSCHED_RESTART_COUNT; exit 5"});
  CliResult follow = Run({"logs", "-f", std::to_string(id)});
  EXPECT_EQ(follow.code, 5) << follow.err;  // as `wait` ends: the task's exit code
  EXPECT_TRUE(Has(follow.err, "task " + std::to_string(id) + " failed (exit)")) << follow.err;
  EXPECT_EQ(Task(id)["attempts"], 2);
  EXPECT_EQ(Run({"logs", std::to_string(id)}).out, "run 1\n");
  EXPECT_EQ(Run({"logs", std::to_string(id), "--attempt", "1"}).out, "run 0\n");
  EXPECT_EQ(Run({"logs", std::to_string(id), "--attempt", "2"}).out, "run 1\n");
  const Json rest =
      Json::parse(HttpGet(http_port_, "/api/v1/tasks/" + std::to_string(id) + "/logs?attempt=1"));
  EXPECT_EQ(rest["data"], "run 0\n") << rest;
  EXPECT_EQ(rest["attempt"], 1) << rest;
  CliResult past = Run({"logs", std::to_string(id), "--attempt", "3"});
  EXPECT_EQ(past.code, 2);
  EXPECT_TRUE(Has(past.err, "attempt: 3 (task " + std::to_string(id) + " has run 2 attempts)"))
      << past.err;
  CliResult bad = Run({"logs", std::to_string(id), "--attempt", "x"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(Has(bad.err, "--attempt: \"x\"")) << bad.err;
}

TEST_F(Issue41Test, Issue41_ALaunchFailureSaysSoInLsShowLogsAndAcct) {
  StartAgent("n1", "1x16GiB");
  const uint64_t id = Submit({"--gpus", "1", "--", "/no/such/program"});
  ASSERT_TRUE(WaitState(id, "failed"));
  const Json t = Task(id);
  EXPECT_EQ(t["failure"], "launch");
  CliResult ls = Run({"ls", "--all"});
  EXPECT_TRUE(Has(ls.out, "failed (launch)")) << ls.out;
  CliResult show = Run({"show", std::to_string(id)});
  EXPECT_TRUE(Has(show.out, "failure:")) << show.out;
  // `logs` of a task that could not start: not an empty success.
  // `logs` of a task that could not start: what the shim said, then why, and exit 1.
  CliResult logs = Run({"logs", std::to_string(id)});
  EXPECT_EQ(logs.code, 1) << logs.out << logs.err;
  EXPECT_TRUE(Has(logs.out, "/no/such/program")) << logs.out;
  EXPECT_TRUE(Has(logs.err, "task " + std::to_string(id) + " could not start: launch failed"))
      << logs.err;
  EXPECT_EQ(Run({"wait", std::to_string(id)}).code, 1);

  // acct counts tasks by how they ended, with the GPU-hours of their runs (a launch that
  // failed ran for no time, so it adds none).
  const uint64_t ok = Submit({"--gpus", "1", "--", "sleep", "0.3"});
  const uint64_t bad = Submit({"--gpus", "1", "--retries", "0", "--", "sh", "-c",
                               "sleep 0.3; exit 4"});
  ASSERT_TRUE(WaitState(ok, "succeeded"));
  ASSERT_TRUE(WaitState(bad, "failed"));
  CliResult acct = Run({"acct", "--by", "failure", "--json"});
  ASSERT_EQ(acct.code, 0) << acct.err;
  std::map<std::string, int64_t> tasks;
  const Json rows = Json::parse(acct.out);
  for (const Json& row : rows["failures"]) {
    tasks[row["failure"].get<std::string>()] = row["tasks"].get<int64_t>();
  }
  EXPECT_EQ(tasks["none"], 1) << acct.out;  // the one that succeeded
  EXPECT_EQ(tasks["exit"], 1) << acct.out;
  CliResult text = Run({"acct", "--by", "failure"});
  EXPECT_TRUE(Has(text.out, "FAILURE")) << text.out;
  CliResult by = Run({"acct", "--by", "nonsense"});
  EXPECT_EQ(by.code, 2);
  EXPECT_TRUE(Has(by.err, "--by: \"nonsense\"")) << by.err;
}

TEST_F(Issue41Test, Issue41_QuotaRmRemovesTheTeamsQuotaAndSaysWhenThereIsNone) {
  CliResult set = Quota({"set", "ml", "--gpus", "1", "--borrow", "unlimited"});
  ASSERT_EQ(set.code, 0) << set.err;
  EXPECT_EQ(set.out, "team ml: 1 GPU guaranteed, borrows without limit\n");  // grammar
  CliResult ls = Quota({"ls", "--json"});
  EXPECT_TRUE(Has(ls.out, "\"ml\"")) << ls.out;
  CliResult rm = Quota({"rm", "ml"});
  EXPECT_EQ(rm.code, 0) << rm.err;
  EXPECT_EQ(rm.out, "quota of team ml removed\n");
  EXPECT_FALSE(Has(Quota({"ls", "--json"}).out, "\"ml\""));
  CliResult again = Quota({"rm", "ml"});
  EXPECT_EQ(again.code, 1);
  EXPECT_TRUE(Has(again.err, "team: \"ml\" has no quota")) << again.err;
  // Stored: a restarted server does not bring it back.
  server_.Kill(SIGTERM);
  StartServer();
  EXPECT_FALSE(Has(Quota({"ls", "--json"}).out, "\"ml\""));
}

TEST_F(Issue41Test, Issue41_EverydayWordsInHelpWhyAndErrors) {
  CliResult help = Cli({"--help"});
  ASSERT_EQ(help.code, 0);
  const size_t submit = help.out.find("  submit");
  const size_t bench = help.out.find("  bench");
  ASSERT_NE(submit, std::string::npos) << help.out;
  ASSERT_NE(bench, std::string::npos) << help.out;
  EXPECT_LT(submit, bench) << "everyday commands come first";
  EXPECT_TRUE(Has(Cli({"submit", "--help"}).out, "default_retries")) << "--retries' default";
  EXPECT_FALSE(Has(Cli({"submit", "--help"}).out, "FAIL_MAX"));

  StartAgent("n1", "1x16GiB");
  CliResult drain = Run({"drain", "nosuch"});
  EXPECT_NE(drain.code, 0);
  EXPECT_TRUE(Has(drain.err, "node nosuch: no such node (nodes: n1)")) << drain.err;
  CliResult show = Run({"show", "1", "2x"});
  EXPECT_EQ(show.code, 2);
  EXPECT_TRUE(Has(show.err, "id: \"2x\"")) << show.err;

  const uint64_t blocker = Submit({"--gpus", "1", "--", "sleep", "60"});
  ASSERT_TRUE(WaitState(blocker, "running"));
  const uint64_t waiting = Submit({"--gpus", "1", "--", "true"});
  // "1 node: too few GPUs" in words; the filter's name only with -v.
  ASSERT_TRUE(PollUntil([&] { return Has(Run({"why", std::to_string(waiting)}).out, "1 node: "); },
                        kDeadline))
      << Run({"why", std::to_string(waiting)}).out;
  CliResult why = Run({"why", std::to_string(waiting)});
  EXPECT_FALSE(Has(why.out, "rejected by")) << why.out;
  CliResult verbose = Run({"why", "-v", std::to_string(waiting)});
  EXPECT_TRUE(Has(verbose.out, "(GpuCount)") || Has(verbose.out, "(GpuMemoryFit)"))
      << verbose.out;
}

}  // namespace
}  // namespace gpusched::testing
