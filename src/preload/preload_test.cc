// The preload library against the test-only fake driver (testing/fake_cuda.c): probes
// (testing/preload_probe.cc) run as child processes with and without LD_PRELOAD, linked
// against libcuda or loading it with dlopen, and the test reads what each call returned.
// Also the ShareLedger in process (several mappings of one file, dead-process reaping,
// concurrent charges).

#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "preload/share_file.h"
#include "preload/share_ledger.h"

namespace gpusched::preload {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;

struct ProbeRun {
  std::string out;
  int exit_code = -1;
};

// Runs `probe` with `args` in an environment of exactly `env` plus PATH; LD_PRELOAD is the
// preload library when `preload`; `share_file`, when not empty, is open read-only on the
// share descriptor (share_file.h), as the agent hands it to a task.
ProbeRun Probe(const std::string& probe, const std::string& args,
               std::map<std::string, std::string> env, bool preload = true,
               const std::string& share_file = "") {
  env["LD_LIBRARY_PATH"] = GPUSCHED_FAKE_CUDA_DIR;
  if (preload) env["LD_PRELOAD"] = GPUSCHED_PRELOAD_LIB;
  std::string command = "env -i PATH=/usr/bin:/bin";
  for (const auto& [k, v] : env) command += " " + k + "='" + v + "'";
  command += " " + probe + " " + args + " 2>&1";
  if (!share_file.empty()) command += " " + std::to_string(kShareFd) + "<'" + share_file + "'";
  ProbeRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe) != nullptr) run.out += buf;
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// The probe's result lines, without the library's refusal messages.
std::vector<std::string> Results(const std::string& out) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(start, end - start);
    if (line.rfind("gpusched:", 0) != 0) lines.push_back(line);
    start = end + 1;
  }
  return lines;
}
std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

const std::string kLinked = GPUSCHED_PROBE_LINKED;

std::string LedgerPathFor(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("gpusched-preload-" + name + "-" + std::to_string(getpid())))
      .string();
}
const std::string kDlopen = GPUSCHED_PROBE_DLOPEN;

// CUDA_SUCCESS = 0, CUDA_ERROR_OUT_OF_MEMORY = 2.
TEST(PreloadTest, WithoutThePreloadTheFakeDriverDoesNotLimit) {
  const ProbeRun r = Probe(kLinked, "alloc 800 alloc 800 info", {{"GPUSCHED_GPU_MEM_MIB", "1024"}},
                           /*preload=*/false);
  EXPECT_EQ(r.out, "alloc 800: 0\nalloc 800: 0\ninfo free=14784 total=16384\n");
}

// The share holds when tasks share a GPU (CN109992422A claim 2 places them so).
TEST(PreloadTest, CN109992422A_Claim2_AllocationPastTheShareIsRefusedAndFreesGiveBack) {
  const ProbeRun r =
      Probe(kLinked, "alloc 400 alloc 400 info alloc 400 free 0 alloc 400 info",
            {{"GPUSCHED_GPU_MEM_MIB", "1024"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(Joined(Results(r.out)),
            "alloc 400: 0\nalloc 400: 0\ninfo free=224 total=1024\n"
            "alloc 400: 2\nfree 0: 0\nalloc 400: 0\ninfo free=224 total=1024\n");
  EXPECT_NE(r.out.find("gpusched: GPU memory share exceeded: refused 400 MiB on device 0, the "
                       "task holds 800 MiB of its 1024 MiB share"),
            std::string::npos)
      << r.out;
}

TEST(PreloadTest, NoShareMeansNoLimit) {
  const ProbeRun r = Probe(kLinked, "alloc 800 alloc 800 info", {});
  EXPECT_EQ(r.out, "alloc 800: 0\nalloc 800: 0\ninfo free=14784 total=16384\n");
}

TEST(PreloadTest, AnUnreadableShareRefusesEveryAllocation) {
  const ProbeRun r = Probe(kLinked, "alloc 1", {{"GPUSCHED_GPU_MEM_MIB", "12x"}});
  EXPECT_NE(r.out.find("GPUSCHED_GPU_MEM_MIB=\"12x\" is not MiB per device"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("alloc 1: 2"), std::string::npos) << r.out;
}

// Each allocating entry point: 60 MiB fits a 100 MiB share, a second 60 does not, and after
// the first is freed it does. Arrays are FLOAT, one channel: 3840 x 4096 x 4 B = 60 MiB.
class PreloadKindTest : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(PreloadKindTest, CN109992422A_Claim2_EveryAllocationKindIsCharged) {
  const std::string op = GetParam().second;
  const ProbeRun r = Probe(kLinked, op + " " + op + " free 0 " + op,
                           {{"GPUSCHED_GPU_MEM_MIB", "100"}});
  // The results in order: granted, refused, the free, granted again.
  std::vector<std::string> results;
  for (const std::string& line : Results(r.out)) results.push_back(line.substr(line.rfind(' ') + 1));
  EXPECT_EQ(results, (std::vector<std::string>{"0", "2", "0", "0"})) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, PreloadKindTest,
    ::testing::Values(std::pair{"cuMemAlloc_v2", "alloc 60"},
                      std::pair{"cuMemAllocManaged", "managed 60"},
                      std::pair{"cuMemAllocAsync", "async 60"},
                      std::pair{"cuMemCreate", "create 60"},
                      std::pair{"cuMemAllocPitch_v2", "pitch 1048576 60"},
                      std::pair{"cuArrayCreate_v2", "array 3840 4096"},
                      std::pair{"cuArray3DCreate_v2", "array3d 1024 1024 15"}),
    [](const auto& param_info) { return std::string(param_info.param.first); });

// The pitch is the driver's: 1000-byte rows padded to 1024 by the fake. 1030 rows pass the
// width x height pre-check (1,030,000 B <= 1 MiB) but not the true-up (1,054,720 B).
TEST(PreloadTest, PitchedAllocationsAreChargedAtTheirRealPitch) {
  const ProbeRun r = Probe(kLinked, "pitch 1000 1030 pitch 1000 1024 info",
                           {{"GPUSCHED_GPU_MEM_MIB", "1"}});
  EXPECT_EQ(Joined(Results(r.out)), "pitch 1000 1030: 2\npitch 1000 1024: 0\ninfo free=0 total=1\n");
}

// A program that loads the driver at run time (as the CUDA runtime does) is limited exactly
// as one linked against it, whichever way it finds the entry points.
class PreloadLookupTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PreloadLookupTest, CN109992422A_Claim2_DlopenedDriverIsLimitedToo) {
  const std::string via = GetParam();
  const std::string ops =
      "alloc 400 alloc 400 alloc 400 free 0 alloc 400 managed 300 create 300 info";
  const ProbeRun linked = Probe(kLinked, ops, {{"GPUSCHED_GPU_MEM_MIB", "1024"}});
  const ProbeRun loaded = Probe(kDlopen, "--via " + via + " " + ops,
                                {{"GPUSCHED_GPU_MEM_MIB", "1024"}});
  const std::string expected =
      "alloc 400: 0\nalloc 400: 0\nalloc 400: 2\nfree 0: 0\nalloc 400: 0\nmanaged 300: 2\n"
      "create 300: 2\ninfo free=224 total=1024\n";
  EXPECT_EQ(Joined(Results(linked.out)), expected);
  EXPECT_EQ(Joined(Results(loaded.out)), expected) << "via " << via;
  // Control: the same look-ups without the preload library are not limited.
  const ProbeRun bare = Probe(kDlopen, "--via " + via + " alloc 800 alloc 800",
                              {{"GPUSCHED_GPU_MEM_MIB", "1024"}}, /*preload=*/false);
  EXPECT_EQ(bare.out, "alloc 800: 0\nalloc 800: 0\n");
}

INSTANTIATE_TEST_SUITE_P(Via, PreloadLookupTest,
                         ::testing::Values("dlsym", "getproc", "getproc2"));

// Threads allocating 1 MiB chunks (and churning frees) until refused never hold more than
// the share together: the fake driver's peak is what they really held at once.
TEST(PreloadTest, CN109992422A_Claim2_ConcurrentThreadsNeverExceedTheShareTogether) {
  for (int round = 0; round < 3; ++round) {
    const ProbeRun r = Probe(kLinked, "threads 8 1", {{"GPUSCHED_GPU_MEM_MIB", "256"}});
    unsigned granted = 0, peak = 0;
    ASSERT_EQ(sscanf(r.out.c_str() + r.out.find("threads"), "threads granted=%u peak=%u",
                     &granted, &peak), 2) << r.out;
    EXPECT_LE(peak, 256u) << r.out;
    EXPECT_LE(granted, 256u);
    EXPECT_GE(granted, 256u - 8u);  // each thread stops only when the share is (nearly) full
  }
  // Control: without the library the same threads take what the device has.
  const ProbeRun bare = Probe(kLinked, "threads 8 1",
                              {{"GPUSCHED_GPU_MEM_MIB", "256"}, {"FAKE_CUDA_TOTAL_MIB", "512"}},
                              /*preload=*/false);
  EXPECT_NE(bare.out.find("peak=512"), std::string::npos) << bare.out;
}

// The processes of one task share its share: a forked child sees what its parent holds.
TEST(PreloadTest, ProcessesOfOneTaskShareTheShare) {
  const std::string state =
      (std::filesystem::temp_directory_path() / ("gpusched-preload-" + std::to_string(getpid())))
          .string();
  const ProbeRun r = Probe(kLinked, "alloc 600 child 600 child 300 alloc 400 info",
                           {{"GPUSCHED_GPU_MEM_MIB", "1000"}, {"GPUSCHED_PRELOAD_STATE", state}});
  std::filesystem::remove(state);
  EXPECT_NE(r.out.find("child alloc 600: 2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("child alloc 300: 0\n"), std::string::npos) << r.out;
  // The child is gone (reaped): its 300 MiB no longer count.
  EXPECT_NE(r.out.find("alloc 400: 0\ninfo free=0 total=1000\n"), std::string::npos) << r.out;
}

// Separate CUDA ordinals, separate shares.
TEST(PreloadTest, EachDeviceHasItsOwnShare) {
  const ProbeRun r = Probe(kLinked, "device 1 alloc 200 info device 0 alloc 200 info",
                           {{"GPUSCHED_GPU_MEM_MIB", "100,300"}});
  EXPECT_NE(r.out.find("alloc 200: 0\ninfo free=100 total=300\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alloc 200: 2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("info free=100 total=100\n"), std::string::npos) << r.out;
}

// The library exports dlsym; RTLD_NEXT must stay relative to the caller, not to the library.
TEST(PreloadTest, DlsymRtldNextStaysRelativeToTheCaller) {
  EXPECT_EQ(Probe(kLinked, "next", {}).out, "next preload\n");
  EXPECT_EQ(Probe(kLinked, "next", {}, /*preload=*/false).out, "next other\n");
}


// ---------------------------------------------------------------- issue 35: not switched off

// The result codes of a probe run, in order (the library's messages left out).
std::vector<std::string> Codes(const std::string& out) {
  std::vector<std::string> codes;
  for (const std::string& line : Results(out)) codes.push_back(line.substr(line.rfind(' ') + 1));
  return codes;
}

// Each entry point wrapped for issue 35, found by each route: 60 MiB fits a 100 MiB share, a
// second 60 does not, and after the first is released it does again. The mipmapped array:
// FLOAT, 4096 x 3072 (48 MiB) and its second level (12 MiB).
// ({entry point, probe op}, route)
using NewKind = std::tuple<std::pair<const char*, const char*>, const char*>;
class PreloadNewKindTest : public ::testing::TestWithParam<NewKind> {};

TEST_P(PreloadNewKindTest, Issue35_EveryAllocationEntryPointIsCharged) {
  const auto& [kind, via] = GetParam();
  const char* name = kind.first;
  const std::string op = kind.second;
  const std::string ops = op + " " + op + " free 0 " + op;
  const bool linked = std::string(via) == "linked";
  const std::string args = (linked ? "" : "--via " + std::string(via) + " ") + ops;
  const ProbeRun r = Probe(linked ? kLinked : kDlopen, args, {{"GPUSCHED_GPU_MEM_MIB", "100"}});
  EXPECT_EQ(Codes(r.out), (std::vector<std::string>{"0", "2", "0", "0"})) << name << "\n" << r.out;
  EXPECT_NE(r.out.find("gpusched: GPU memory share exceeded: refused 60 MiB"), std::string::npos)
      << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, PreloadNewKindTest,
    ::testing::Combine(
        ::testing::Values(std::pair{"cuMipmappedArrayCreate", "mipmap 4096 3072 1 2"},
                          std::pair{"cuGraphAddMemAllocNode", "graphalloc 60"},
                          std::pair{"cuGraphAddNode_v2", "graphnode 60"},
                          std::pair{"cuMemAllocFromPoolAsync", "pool 60"},
                          std::pair{"cuIpcOpenMemHandle_v2", "ipcopen 60"},
                          std::pair{"cuMemPoolImportPointer", "poolimport 60"},
                          std::pair{"cuMemImportFromShareableHandle", "fdimport 60"}),
        ::testing::Values("linked", "dlsym", "getproc", "getproc2")),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).first) + "_" + std::get<1>(info.param);
    });

// A graph that frees its allocation inside itself still holds the memory whenever it runs:
// the charge stays until the graph is destroyed.
TEST(PreloadTest, Issue35_GraphMemoryFreedInItsGraphIsHeldUntilTheGraphIsDestroyed) {
  const ProbeRun r = Probe(kLinked, "graphalloc 60 graphfree 0 alloc 60 graphdestroy 0 alloc 60 info",
                           {{"GPUSCHED_GPU_MEM_MIB", "100"}});
  EXPECT_EQ(Joined(Results(r.out)),
            "graphalloc 60: 0\ngraphfree 0: 0\nalloc 60: 2\ngraphdestroy 0: 0\nalloc 60: 0\n"
            "info free=40 total=100\n");
}

// Memory a process of the task exported is charged to it already: opening it is not charged
// again (NCCL and CUDA IPC between a task's workers).
TEST(PreloadTest, Issue35_ImportOfMemoryTheTaskExportedIsNotChargedTwice) {
  const ProbeRun r = Probe(kLinked, "alloc 60 ipcshare 0 alloc 30 info",
                           {{"GPUSCHED_GPU_MEM_MIB", "100"}});
  EXPECT_EQ(Joined(Results(r.out)), "alloc 60: 0\nipcshare 0: 0\nalloc 30: 0\ninfo free=10 total=100\n");
}

// The agent's share file, as the agent writes it: owned by root (or by the agent's user,
// which is not the task's), mode 0400. The test runs as any user: a file of the test's own
// user would be the task's own, which the library ignores, so as non-root it is skipped.
class ShareFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (the share file must not be the task's own)";
    path_ = (std::filesystem::temp_directory_path() /
             ("gpusched-share-" + std::to_string(getpid()))).string();
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }
  void Write(const std::string& text, std::filesystem::perms mode) {
    std::filesystem::remove(path_);
    FILE* f = fopen(path_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(text.c_str(), f);
    fclose(f);
    std::filesystem::permissions(path_, mode);
  }
  std::string path_;
};

constexpr auto kReadOnly = std::filesystem::perms::owner_read;

TEST_F(ShareFileTest, Issue35_EmptiedShareVariableDoesNotLiftTheShare) {
  Write(std::string(kShareFileMagic) + "100\n", kReadOnly);
  const ProbeRun r = Probe(kLinked, "alloc 60 alloc 60 info", {{"GPUSCHED_GPU_MEM_MIB", ""}},
                           /*preload=*/true, path_);
  EXPECT_EQ(Joined(Results(r.out)), "alloc 60: 0\nalloc 60: 2\ninfo free=40 total=100\n");
  // Unset altogether, likewise.
  const ProbeRun unset = Probe(kLinked, "alloc 60 alloc 60", {}, /*preload=*/true, path_);
  EXPECT_EQ(Joined(Results(unset.out)), "alloc 60: 0\nalloc 60: 2\n");
}

TEST_F(ShareFileTest, Issue35_RaisedShareVariableDoesNotRaiseTheShare) {
  Write(std::string(kShareFileMagic) + "100,200\n", kReadOnly);
  const ProbeRun r = Probe(kLinked, "alloc 60 alloc 60 device 1 alloc 150 info",
                           {{"GPUSCHED_GPU_MEM_MIB", "100000,100000"}}, /*preload=*/true, path_);
  EXPECT_EQ(Joined(Results(r.out)),
            "alloc 60: 0\nalloc 60: 2\nalloc 150: 0\ninfo free=50 total=200\n");
}

// A share file anyone may write is no authority: every allocation is refused.
TEST_F(ShareFileTest, Issue35_WritableShareFileRefusesEveryAllocation) {
  Write(std::string(kShareFileMagic) + "100000\n",
        kReadOnly | std::filesystem::perms::owner_write);
  const ProbeRun r = Probe(kLinked, "alloc 1", {{"GPUSCHED_GPU_MEM_MIB", "100000"}},
                           /*preload=*/true, path_);
  EXPECT_NE(r.out.find("the share file (descriptor 4) is writable"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alloc 1: 2\n"), std::string::npos) << r.out;
}

// Some other file on the descriptor (the task's own): the variable is the share.
TEST_F(ShareFileTest, Issue35_AnotherFileOnTheDescriptorIsNotTheShare) {
  Write("not a share file\n", kReadOnly);
  const ProbeRun r = Probe(kLinked, "alloc 60 alloc 60", {{"GPUSCHED_GPU_MEM_MIB", "100"}},
                           /*preload=*/true, path_);
  EXPECT_EQ(Joined(Results(r.out)), "alloc 60: 0\nalloc 60: 2\n");
}

// The ledger file is the task's: zeroing or truncating it erases nothing this process holds.
class LedgerTamperTest : public ::testing::TestWithParam<const char*> {};

TEST_P(LedgerTamperTest, Issue35_RewritingTheLedgerDoesNotEraseThisProcessUsage) {
  const std::string state = LedgerPathFor(GetParam());
  const ProbeRun r = Probe(kLinked, std::string("alloc 60 ") + GetParam() + " alloc 60 info",
                           {{"GPUSCHED_GPU_MEM_MIB", "100"}, {"GPUSCHED_PRELOAD_STATE", state}});
  std::filesystem::remove(state);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(Joined(Results(r.out)),
            std::string("alloc 60: 0\n") + GetParam() + ": done\nalloc 60: 2\ninfo free=40 total=100\n");
}

INSTANTIATE_TEST_SUITE_P(Tamper, LedgerTamperTest, ::testing::Values("wipe", "truncate"),
                         [](const auto& info) { return std::string(info.param); });

// ---------------------------------------------------------------- ShareLedger in process

std::string LedgerPath(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("gpusched-ledger-") + name + "-" + std::to_string(getpid())))
      .string();
}

TEST(ShareLedgerTest, TwoMappingsOfOneFileShareOneLimit) {
  const std::string path = LedgerPath("two");
  std::filesystem::remove(path);
  const char* error = "";
  ShareLedger* a = ShareLedger::Open(path.c_str(), &error);
  ShareLedger* b = ShareLedger::Open(path.c_str(), &error);
  ASSERT_NE(a, nullptr) << error;
  ASSERT_NE(b, nullptr) << error;
  EXPECT_TRUE(a->Charge(0, 600 * kMiB, 1000 * kMiB));
  EXPECT_FALSE(b->Charge(0, 600 * kMiB, 1000 * kMiB));
  EXPECT_TRUE(b->Charge(0, 400 * kMiB, 1000 * kMiB));
  EXPECT_TRUE(b->Charge(1, 1000 * kMiB, 1000 * kMiB));  // another device
  EXPECT_EQ(a->Held(0), 1000 * kMiB);
  a->Release(0, 600 * kMiB);
  EXPECT_EQ(b->Held(0), 400 * kMiB);
  std::filesystem::remove(path);
}

TEST(ShareLedgerTest, ADeadProcessChargeIsReaped) {
  const std::string path = LedgerPath("dead");
  std::filesystem::remove(path);
  const pid_t child = fork();
  if (child == 0) {
    const char* error = "";
    ShareLedger* l = ShareLedger::Open(path.c_str(), &error);
    _exit(l != nullptr && l->Charge(0, 900 * kMiB, 1000 * kMiB) ? 0 : 1);  // no LeaveProcess
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const char* error = "";
  ShareLedger* l = ShareLedger::Open(path.c_str(), &error);
  ASSERT_NE(l, nullptr) << error;
  EXPECT_TRUE(l->Charge(0, 900 * kMiB, 1000 * kMiB));  // the dead child's 900 went
  EXPECT_EQ(l->Held(0), 900 * kMiB);
  std::filesystem::remove(path);
}

TEST(ShareLedgerTest, Issue35_ARewrittenLedgerKeepsThisProcessFloor) {
  const std::string path = LedgerPath("floor");
  std::filesystem::remove(path);
  const char* error = "";
  ShareLedger* l = ShareLedger::Open(path.c_str(), &error);
  ASSERT_NE(l, nullptr) << error;
  ASSERT_TRUE(l->Charge(0, 600 * kMiB, 1000 * kMiB));
  ASSERT_EQ(truncate(path.c_str(), 0), 0);  // the task cuts its ledger to nothing
  EXPECT_FALSE(l->Charge(0, 600 * kMiB, 1000 * kMiB));
  EXPECT_EQ(l->Held(0), 600 * kMiB);
  EXPECT_EQ(l->HeldByThisProcess(0), 600 * kMiB);
  l->Release(0, 600 * kMiB);
  EXPECT_TRUE(l->Charge(0, 1000 * kMiB, 1000 * kMiB));
  std::filesystem::remove(path);
}

TEST(ShareLedgerTest, ConcurrentChargesNeverExceedTheLimit) {
  const char* error = "";
  ShareLedger* l = ShareLedger::Open(nullptr, &error);
  ASSERT_NE(l, nullptr) << error;
  constexpr uint64_t kLimit = 1000;
  std::atomic<uint64_t> granted{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (!l->Charge(0, 7, kLimit)) continue;
        const uint64_t now = granted.fetch_add(7) + 7;
        uint64_t seen = most.load();
        while (seen < now && !most.compare_exchange_weak(seen, now)) {
        }
        granted.fetch_sub(7);
        l->Release(0, 7);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(most.load(), kLimit);
  EXPECT_EQ(l->Held(0), 0u);
}

}  // namespace
}  // namespace gpusched::preload
