// Trace loaders: every format, errors naming file, line, field and value, skipping bad lines.

#include "sim/trace.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/testing/test_data.h"

namespace gpusched::sim {
namespace {

using testing::kData;

TEST(TraceTest, PlainCsvInSeconds) {
  auto t = LoadTrace(kData + "/tiny_nonpreemptive.csv", TraceFormat::kCsv);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 5u);
  EXPECT_EQ(t->jobs[1].id, "J1");
  EXPECT_EQ(t->jobs[1].num_gpu, 4);
  EXPECT_EQ(t->jobs[1].submit_ms, 10'000);
  EXPECT_EQ(t->jobs[1].duration_ms, 30'000);
  EXPECT_EQ(t->jobs[1].gpu_milli, 1000);
}

TEST(TraceTest, BadLineIsAnErrorNamingFileLineFieldAndValue) {
  auto t = LoadTrace(kData + "/bad_line.csv", TraceFormat::kCsv);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("bad_line.csv:3: field num_gpu: \"two\" is not an integer"),
            std::string::npos)
      << t.status().message();
}

TEST(TraceTest, BadLinesAreSkippedAndCountedWhenAsked) {
  auto t = LoadTrace(kData + "/bad_line.csv", TraceFormat::kCsv, LoadOptions{true});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->skipped_lines, 1);
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[1].gpu_mem_mib, 2048);
  EXPECT_NE(t->first_skipped_error.find(":3:"), std::string::npos);
}

TEST(TraceTest, MissingColumnIsNamed) {
  std::istringstream in("job_id,num_gpu,duration\n1,1,5\n");
  auto t = ParseTrace(in, "x.csv", TraceFormat::kCsv);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "x.csv:1: header: missing column \"submit_time\"");
}

// Unsorted rows and a final blank line (the quirks of philly_jobs_pollux.csv).
TEST(TraceTest, PhillyPolluxIsSortedAndRelativeToTheFirstJob) {
  auto t = LoadTrace(kData + "/philly_pollux_sample.csv", TraceFormat::kPhilly);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 3u);
  EXPECT_EQ(t->jobs[0].num_gpu, 2);  // 06:13:03 comes first
  EXPECT_EQ(t->jobs[0].submit_ms, 0);
  EXPECT_EQ(t->jobs[1].submit_ms, (48 * 60 + 52) * 1000);  // 07:01:55 - 06:13:03
  EXPECT_EQ(t->jobs[2].submit_ms, 86'400'000);
  EXPECT_EQ(t->jobs[1].duration_ms, 66'000);
  EXPECT_EQ(t->jobs[0].cluster, "6214e9");
}

TEST(TraceTest, PhillyPolluxBadTimestamp) {
  std::istringstream in("timestamp,duration,num_gpus,gpu_time,cluster\n2017-13-01 00:00:00,1,1,1,a\n");
  auto t = ParseTrace(in, "p.csv", TraceFormat::kPhilly);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("p.csv:2: field timestamp: \"2017-13-01 00:00:00\""),
            std::string::npos);
}

// '#' header and no final newline (the quirks of philly_jobs_rfold.csv); zero duration kept.
TEST(TraceTest, PhillyRfold) {
  auto t = LoadTrace(kData + "/philly_rfold_sample.csv", TraceFormat::kPhillyRfold);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[1].num_gpu, 4);
  EXPECT_EQ(t->jobs[1].submit_ms, 266'563'000);
  EXPECT_EQ(t->jobs[1].duration_ms, 0);
}

TEST(TraceTest, AlibabaPodsWithGpuShares) {
  auto t = LoadTrace(kData + "/alibaba_pods_sample.csv", TraceFormat::kAlibaba);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 5u);
  EXPECT_EQ(t->jobs[1].gpu_milli, 500);
  EXPECT_EQ(t->jobs[1].duration_ms, 90'000);  // deletion 110 - scheduled 20
  EXPECT_EQ(t->jobs[2].duration_ms, 10'000);  // never scheduled: deletion - creation
  EXPECT_EQ(t->jobs[3].num_gpu, 0);
  EXPECT_EQ(t->jobs[4].gpu_milli, 1000);
  EXPECT_EQ(t->jobs[0].cpu_milli, 12'000);
  EXPECT_EQ(t->jobs[0].mem_mib, 16'384);
}

TEST(TraceTest, FormatNames) {
  EXPECT_EQ(*ParseTraceFormat("philly-rfold"), TraceFormat::kPhillyRfold);
  EXPECT_EQ(ParseTraceFormat("tsv").status().message(),
            "format: \"tsv\" is not one of csv, philly, philly-rfold, alibaba");
}

}  // namespace
}  // namespace gpusched::sim
