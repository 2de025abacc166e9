#include "base/units.h"

#include <gtest/gtest.h>

namespace gpusched {
namespace {

TEST(Units, ParsesSizes) {
  EXPECT_EQ(*ParseSizeMiB("80GiB", "gpus"), 80 * 1024);
  EXPECT_EQ(*ParseSizeMiB("512MiB", "x"), 512);
  EXPECT_EQ(*ParseSizeMiB("1.5g", "x"), 1536);
  EXPECT_EQ(*ParseSizeMiB("300", "x"), 300);
  EXPECT_EQ(*ParseSizeMiB("1TiB", "x"), 1024 * 1024);
}

TEST(Units, DecimalSizesAreTenToTheNinthBytes) {  // kubectl's G beside Gi
  EXPECT_EQ(*ParseSizeMiB("6GB", "x"), 5722);  // 6e9 bytes = 5722.0 MiB
  EXPECT_EQ(*ParseSizeMiB("1gb", "x"), 954);
  EXPECT_EQ(*ParseSizeMiB("500MB", "x"), 477);
  EXPECT_EQ(*ParseSizeMiB("1TB", "x"), 953674);
  EXPECT_EQ(*ParseSizeMiB("6GiB", "x"), 6144);
}

TEST(Units, SizeErrorsNameFieldAndValue) {
  auto neg = ParseSizeMiB("-5GiB", "gpu_mem");
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().message(), "gpu_mem: must be >= 0, got \"-5GiB\"");
  auto unit = ParseSizeMiB("12XB", "mem");
  ASSERT_FALSE(unit.ok());
  EXPECT_NE(unit.status().message().find("mem: unknown size unit \"xb\""), std::string::npos);
  EXPECT_FALSE(ParseSizeMiB("", "mem").ok());
  EXPECT_FALSE(ParseSizeMiB("GiB", "mem").ok());
  EXPECT_FALSE(ParseSizeMiB("1e30GiB", "mem").ok());
}

// Kubernetes' CPU quantities: cores or millicores, as submit --cpu, job files and REST take.
TEST(Units, CpuIsCoresOrMillicores) {
  EXPECT_EQ(*ParseCpuMilli("4", "cpu"), 4000);
  EXPECT_EQ(*ParseCpuMilli("0.5", "cpu"), 500);
  EXPECT_EQ(*ParseCpuMilli("500m", "cpu"), 500);
  EXPECT_EQ(*ParseCpuMilli("1.5m", "cpu"), 2);  // to the nearest millicore
  EXPECT_EQ(*ParseCpuMilli("0", "cpu"), 0);
  auto bad = ParseCpuMilli("2x", "--cpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--cpu: \"2x\" is not a CPU amount (use 4 or 500m)");
  auto neg = ParseCpuMilli("-1", "cpu");
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().message(), "cpu: must be >= 0, got \"-1\"");
  for (const char* text : {"", "m", "4mm", "4 cores", "1e20", "500M"}) {
    EXPECT_FALSE(ParseCpuMilli(text, "cpu").ok()) << text;
  }
}

TEST(Units, ParsesDurations) {
  EXPECT_EQ(*ParseDurationMs("30s", "d"), 30'000);
  EXPECT_EQ(*ParseDurationMs("5m", "d"), 300'000);
  EXPECT_EQ(*ParseDurationMs("2h", "d"), 7'200'000);
  EXPECT_EQ(*ParseDurationMs("250ms", "d"), 250);
  EXPECT_EQ(*ParseDurationMs("0.5h", "d"), 1'800'000);
  EXPECT_EQ(*ParseDurationMs("10", "d"), 10'000);
  auto bad = ParseDurationMs("5 weeks", "duration");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("duration:"), std::string::npos);
}

TEST(Units, Formats) {
  EXPECT_EQ(FormatSizeMiB(80 * 1024), "80GiB");
  EXPECT_EQ(FormatSizeMiB(1536), "1.5GiB");
  EXPECT_EQ(FormatSizeMiB(500), "500MiB");
  EXPECT_EQ(FormatDurationMs(5'400'000), "1h30m");
  EXPECT_EQ(FormatDurationMs(45'000), "45s");
  EXPECT_EQ(FormatDurationMs(250), "250ms");
}

}  // namespace
}  // namespace gpusched

namespace gpusched {
namespace {

TEST(TimePointTest, IsoDatesAndTimesAgo) {
  const int64_t now = 1'800'000'000'000;
  EXPECT_EQ(*ParseTimePointMs("1970-01-01", "since", now), 0);
  EXPECT_EQ(*ParseTimePointMs("2026-11-30", "since", now), 1'795'996'800'000);  // date -d
  EXPECT_EQ(*ParseTimePointMs("2026-11-30T12:00:00Z", "until", now), 1'796'040'000'000);
  EXPECT_EQ(*ParseTimePointMs("2024-02-29", "since", now), 1'709'164'800'000);
  EXPECT_EQ(*ParseTimePointMs("7d", "since", now), now - 7 * 86'400'000LL);
  EXPECT_EQ(*ParseTimePointMs("12h", "since", now), now - 12 * 3'600'000LL);
  for (const char* bad : {"yesterday", "2026-13-01", "2026-02-29", "2026-11-30T25:00:00Z",
                          "2026-11-30T12:00Z", "2026-11-30 12:00:00", "12", "", "-3d", "7x"}) {
    StatusOr<int64_t> r = ParseTimePointMs(bad, "since", now);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              std::string("since: \"") + bad +
                  "\" is not a date (2026-11-30 or 2026-11-30T12:00:00Z, UTC) nor a time ago "
                  "(7d, 12h, 30m)");
  }
}

}  // namespace
}  // namespace gpusched

namespace gpusched {
namespace {

TEST(SplitCountSpec, SplitsAtEachX) {
  auto p = SplitCountSpec("1x64x80GiB", 2, 3, "cluster", "NxG[xMEM]");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, (std::vector<std::string_view>{"1", "64", "80GiB"}));
  EXPECT_EQ(SplitCountSpec("8x80GiB", 2, 2, "gpus", "COUNTxSIZE")->size(), 2u);
}

TEST(SplitCountSpec, RefusesEmptyPartsAndWrongCounts) {
  for (const char* bad : {"2x", "x4", "x", "", "100", "1x2x3x4", "1xx2", "8x80GiBx"}) {
    auto p = SplitCountSpec(bad, 2, 3, "cluster", "NxG[xMEM], e.g. 100x8");
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().message(),
              "cluster: \"" + std::string(bad) + "\" is not NxG[xMEM], e.g. 100x8");
  }
}

TEST(ParseWholeNumber, DigitsOnlyWithinBounds) {
  EXPECT_EQ(*ParseWholeNumber("8", 1, 64, "count"), 8);
  EXPECT_EQ(*ParseWholeNumber("0", 0, 1024, "G"), 0);
  EXPECT_EQ(*ParseWholeNumber("007", 1, 64, "count"), 7);
  for (const char* bad : {"0", "65", "", "-1", "+1", " 1", "1 ", "1.0", "0x8", "4x",
                          "99999999999999999999999"}) {
    auto n = ParseWholeNumber(bad, 1, 64, "count");
    ASSERT_FALSE(n.ok()) << bad;
    EXPECT_EQ(n.status().message(),
              "count: \"" + std::string(bad) + "\" is not a whole number from 1 to 64");
  }
}

TEST(ParseWholeNumber, NxGWithZeroNodesFailsOnN) {
  auto parts = SplitCountSpec("0x8", 2, 3, "cluster", "NxG");
  ASSERT_TRUE(parts.ok());  // the shape is fine; N is out of range
  EXPECT_FALSE(ParseWholeNumber((*parts)[0], 1, 1'000'000, "cluster N").ok());
}

TEST(ParseIndexRange, RangesAndSingleIndices) {
  auto r = ParseIndexRange("0-999", 10'000, "--array");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->first, 0);
  EXPECT_EQ(r->last, 999);
  EXPECT_EQ(r->count(), 1000);
  r = ParseIndexRange("7", 10'000, "--array");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, 7);
  EXPECT_EQ(r->count(), 1);
  r = ParseIndexRange("5-5", 1, "--array");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->count(), 1);
}

TEST(ParseIndexRange, ErrorsNameTheFieldAndTheValue) {
  for (const char* bad : {"", "-", "1-", "-3", "a-b", "1-2-3", "1,2", "1:2", " 1-2", "+1-2",
                          "0-1000000001"}) {
    auto r = ParseIndexRange(bad, 10'000, "--array");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              "--array: \"" + std::string(bad) +
                  "\" is not an index range A-B (whole numbers from 0 to 1000000000, e.g. "
                  "0-99) or one index");
  }
  EXPECT_EQ(ParseIndexRange("9-3", 10'000, "--array").status().message(),
            "--array: \"9-3\" ends before it starts");
  EXPECT_EQ(ParseIndexRange("1-10001", 10'000, "--array").status().message(),
            "--array: \"1-10001\" has 10001 indices; at most 10000 in one array");
  EXPECT_TRUE(ParseIndexRange("1-10000", 10'000, "--array").ok());
}

}  // namespace
}  // namespace gpusched
