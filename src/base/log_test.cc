#include "base/log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace gpusched::logging {
namespace {

// 2026-12-04T12:00:00.123Z
constexpr TimeMs kT = 1'796'385'600'123;

struct Captured {
  FakeClock clock{kT};
  std::vector<std::string> lines;
  Logger logger{clock, [this](std::string_view l) { lines.emplace_back(l); }};
};

TEST(Issue39_Log, TextLineHasTimeLevelComponentTaskAndNode) {
  EXPECT_EQ(FormatLine(Format::kText, kT, Level::kInfo, "server", "task started",
                       TaskF(7, "n1")),
            "2026-12-04T12:00:00.123Z INFO server [task 7] [node n1] task started\n");
  EXPECT_EQ(FormatLine(Format::kText, kT, Level::kWarn, "agent", "x", {}),
            "2026-12-04T12:00:00.123Z WARN agent x\n");
}

TEST(Issue39_Log, JsonLineHasTheKeysAndTaskAsANumber) {
  EXPECT_EQ(FormatLine(Format::kJson, kT, Level::kError, "store", "commit failed",
                       TaskF(7, "n1")),
            "{\"time\":\"2026-12-04T12:00:00.123Z\",\"level\":\"error\",\"component\":\"store\","
            "\"msg\":\"commit failed\",\"task\":7,\"node\":\"n1\"}\n");
  EXPECT_EQ(FormatLine(Format::kJson, kT, Level::kInfo, "server", "up", {}),
            "{\"time\":\"2026-12-04T12:00:00.123Z\",\"level\":\"info\",\"component\":\"server\","
            "\"msg\":\"up\"}\n");
}

TEST(Issue39_Log, HostileStringsStayOneLineAndValidJson) {
  const std::string hostile = "a\"b\\c\nd\re\tf\x01g\x7f\xff\xc3(h\xc3\xa9";
  const std::string json =
      FormatLine(Format::kJson, kT, Level::kInfo, "server", "task named " + hostile,
                 NodeF("n\"1\n"));
  EXPECT_EQ(std::count(json.begin(), json.end(), '\n'), 1) << json;
  EXPECT_NE(json.find(R"(task named a\"b\\c\nd\re\tf\u0001g\u007F\uFFFD\uFFFD(h)"
                      "\xc3\xa9\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("node":"n\"1\n")"), std::string::npos) << json;
  const std::string text =
      FormatLine(Format::kText, kT, Level::kInfo, "server", hostile, NodeF("n\n1"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("[node n\\n1] a\"b\\c\\nd\\re\\tf\\x01g\\x7F"), std::string::npos) << text;
}

TEST(Issue39_Log, TimesBeforeAndAfterASecondBoundary) {
  EXPECT_EQ(FormatTime(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatTime(999), "1970-01-01T00:00:00.999Z");
  EXPECT_EQ(FormatTime(1000), "1970-01-01T00:00:01.000Z");
}

TEST(Issue39_Log, LevelFilterDropsLinesBelowIt) {
  Captured c;
  c.logger.Configure(Level::kWarn, Format::kText);
  c.logger.Log(Level::kInfo, "server", "quiet");
  c.logger.Log(Level::kDebug, "server", "quieter");
  c.logger.Log(Level::kError, "server", "loud");
  ASSERT_EQ(c.lines.size(), 1u);
  EXPECT_NE(c.lines[0].find("ERROR server loud"), std::string::npos);
  c.logger.Configure(Level::kTrace, Format::kJson);
  c.logger.Log(Level::kTrace, "agent", "all");
  ASSERT_EQ(c.lines.size(), 2u);
  EXPECT_NE(c.lines[1].find("\"level\":\"trace\""), std::string::npos);
}

TEST(Issue39_Log, ParseRefusesBadValuesNamingFieldAndValue) {
  EXPECT_EQ(*ParseLevel("debug", "--log-level"), Level::kDebug);
  EXPECT_EQ(*ParseFormat("json", "--log-format"), Format::kJson);
  const Status bad_level = ParseLevel("verbose", "--log-level").status();
  EXPECT_NE(bad_level.message().find("--log-level: \"verbose\""), std::string::npos)
      << bad_level.message();
  const Status bad_format = ParseFormat("xml", "log_format").status();
  EXPECT_NE(bad_format.message().find("log_format: \"xml\""), std::string::npos)
      << bad_format.message();
}

TEST(Issue39_Log, RepeatsAreWrittenOnceAWindowWithTheCountHeldBack) {
  Captured c;
  for (int i = 0; i < 30; ++i) {
    c.logger.Log(Level::kWarn, "server", "handshake failed");  // warnings: keyed by message
    c.clock.AdvanceMs(1000);
  }
  c.logger.Log(Level::kWarn, "agent", "handshake failed");  // another component: its own
  ASSERT_EQ(c.lines.size(), 2u);
  c.clock.AdvanceMs(RepeatedLines::kWindowMs);
  c.logger.Log(Level::kWarn, "server", "handshake failed");
  ASSERT_EQ(c.lines.size(), 3u);
  EXPECT_NE(c.lines[2].find("handshake failed (and 29 more like it before)"), std::string::npos)
      << c.lines[2];
  c.logger.Configure(Level::kInfo, Format::kJson);
  Fields keyed;
  keyed.repeat_key = "reconnect";
  c.logger.Log(Level::kInfo, "agent", "cannot reach a", keyed);
  c.logger.Log(Level::kInfo, "agent", "cannot reach b", keyed);  // same key: held back
  c.clock.AdvanceMs(RepeatedLines::kWindowMs);
  c.logger.Log(Level::kInfo, "agent", "cannot reach c", keyed);
  ASSERT_EQ(c.lines.size(), 5u);
  EXPECT_NE(c.lines[4].find("\"suppressed\":1"), std::string::npos) << c.lines[4];
  // Info without a key is never held back.
  c.logger.Log(Level::kInfo, "server", "agent n1 connected");
  c.logger.Log(Level::kInfo, "server", "agent n1 connected");
  EXPECT_EQ(c.lines.size(), 7u);
}

// A client failing its TLS handshake every second wrote one line a second on the server.
TEST(RepeatedLinesTest, ALineIsWrittenOnceAMinuteWithTheCountOfThoseHeldBack) {
  FakeClock clock(1'000'000);
  RepeatedLines lines(clock);
  EXPECT_EQ(lines.Admit("handshake failed"), 0);
  for (int i = 0; i < 59; ++i) {
    clock.AdvanceMs(1000);
    EXPECT_EQ(lines.Admit("handshake failed"), -1) << i;
  }
  EXPECT_EQ(lines.Admit("another line"), 0);  // each line counted apart
  clock.AdvanceMs(1000);                       // a minute after it was written
  EXPECT_EQ(lines.Admit("handshake failed"), 59);
  EXPECT_EQ(lines.Admit("handshake failed"), -1);  // and the next minute starts
  clock.AdvanceMs(RepeatedLines::kWindowMs);
  EXPECT_EQ(lines.Admit("handshake failed"), 1);
}

TEST(Issue39_Log, RepeatedLinesForgetEverythingPastTheirBound) {
  FakeClock clock(1'000'000);
  RepeatedLines lines(clock);
  EXPECT_EQ(lines.Admit("first"), 0);
  for (size_t i = 1; i < RepeatedLines::kMaxRemembered; ++i) {
    EXPECT_EQ(lines.Admit("line " + std::to_string(i)), 0);
  }
  EXPECT_EQ(lines.Admit("first"), -1);
  EXPECT_EQ(lines.Admit("one too many"), 0);
  EXPECT_EQ(lines.Admit("first"), 0);
}

}  // namespace
}  // namespace gpusched::logging
