#include "extender/json_reader.h"

#include <gtest/gtest.h>

#include "extender/json_writer.h"

namespace gpusched::extender {
namespace {

JsonDoc Parse(std::string_view text) {
  auto doc = JsonDoc::Parse(text, "test");
  EXPECT_TRUE(doc.ok()) << doc.status().ToString();
  return std::move(doc).value();
}

TEST(JsonReader, ReadsObjectsArraysAndScalars) {
  const std::string text = R"({"a": [1, -2.5e3, true, false, null, "x"], "b": {"c": 42}})";
  JsonDoc doc = Parse(text);
  const JsonValue a = doc.root().Get("a");
  ASSERT_TRUE(a.is_array());
  EXPECT_EQ(a.size(), 6u);
  std::vector<std::string> raws;
  a.ForEachItem([&](JsonValue v) {
    raws.emplace_back(v.raw());
    return true;
  });
  EXPECT_EQ(raws, (std::vector<std::string>{"1", "-2.5e3", "true", "false", "null", "\"x\""}));
  EXPECT_EQ(doc.root().Get("b").Get("c").Int(), 42);
  EXPECT_EQ(doc.root().Get("b").raw(), R"({"c": 42})");
  EXPECT_FALSE(doc.root().Get("a").Int().has_value());
}

TEST(JsonReader, NullAndMissingKeysReadTheSame) {
  JsonDoc doc = Parse(R"({"Nodes": null})");
  EXPECT_TRUE(doc.root().Get("Nodes").is_null());
  EXPECT_TRUE(doc.root().Get("NodeNames").is_null());
  EXPECT_FALSE(doc.root().Get("NodeNames").present());
  EXPECT_EQ(doc.root().Get("NodeNames").Get("x").StringOr("fallback"), "fallback");
}

TEST(JsonReader, GetFoldMatchesLikeGo_ExactFirstThenCaseInsensitive) {
  JsonDoc doc = Parse(R"({"nodenames": 1, "NodeNames": 2, "podUID": 3})");
  EXPECT_EQ(doc.root().GetFold("NodeNames").Int(), 2);  // exact wins though it comes later
  EXPECT_EQ(doc.root().GetFold("NODENAMES").Int(), 1);  // else the first case-folded match
  EXPECT_EQ(doc.root().GetFold("PodUID").Int(), 3);
  EXPECT_FALSE(doc.root().Get("PodUID").present());  // Get is exact
}

TEST(JsonReader, DecodesEscapesIncludingGoHtmlEscapesAndSurrogatePairs) {
  JsonDoc doc = Parse(R"(["BERT-large \u003cfine-tune\u003e \u0026 eval", "a\"b\\c\/d\n", "\ud83d\ude80", "\ud800x"])");
  std::vector<std::string> s;
  doc.root().ForEachItem([&](JsonValue v) {
    s.push_back(*v.String());
    return true;
  });
  EXPECT_EQ(s[0], "BERT-large <fine-tune> & eval");
  EXPECT_EQ(s[1], "a\"b\\c/d\n");
  EXPECT_EQ(s[2], "\xF0\x9F\x9A\x80");
  EXPECT_EQ(s[3], "\xEF\xBF\xBDx");  // a lone surrogate decodes to U+FFFD, as in Go
}

TEST(JsonReader, EscapedKeysAreDecodedBeforeMatching) {
  JsonDoc doc = Parse(R"({"Pod\u0055ID": "u"})");
  EXPECT_EQ(doc.root().Get("PodUID").StringOr(), "u");
  EXPECT_TRUE(doc.root().Get("PodUID").StringEquals("u"));
}

TEST(JsonReader, RejectsMalformedInputNamingTheByte) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "expected a value"},
      {"{", "expected a string key"},
      {R"({"a" 1})", "expected ':'"},
      {R"({"a":1,})", "expected a string key"},
      {"[1,]", "unexpected character ']'"},
      {"[1 2]", "expected ','"},
      {R"("abc)", "unterminated string"},
      {"\"a\x01\"", "control character"},
      {R"("\x")", "unknown escape"},
      {R"("\u12G4")", "bad hex digit"},
      {"01", "unexpected data after"},
      {"-", "expected a digit"},
      {"1.", "expected a digit after '.'"},
      {"tru", "unexpected character 't'"},
      {"{} {}", "unexpected data after"},
      {"[}", "unexpected character '}'"},
      {"[1}", "expected ']'"},
  };
  for (const auto& [text, message] : cases) {
    auto doc = JsonDoc::Parse(text, "filter request");
    ASSERT_FALSE(doc.ok()) << text;
    EXPECT_NE(doc.status().message().find("filter request: invalid JSON at byte"), std::string::npos)
        << doc.status().message();
    EXPECT_NE(doc.status().message().find(message), std::string::npos)
        << text << " -> " << doc.status().message();
  }
}

TEST(JsonReader, RejectsNestingDeeperThanTheLimitWithoutRecursing) {
  const std::string deep(100'000, '[');
  auto doc = JsonDoc::Parse(deep, "test");
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("nested deeper than 256"), std::string::npos);
  std::string ok = std::string(256, '[') + std::string(256, ']');
  EXPECT_TRUE(JsonDoc::Parse(ok, "test").ok());
}

TEST(JsonReader, IntRejectsWhatGoWouldNotDecodeIntoInt64) {
  JsonDoc doc = Parse(R"([9223372036854775807, 9223372036854775808, 1.0, 1e3, "1"])");
  std::vector<std::optional<int64_t>> v;
  doc.root().ForEachItem([&](JsonValue x) {
    v.push_back(x.Int());
    return true;
  });
  EXPECT_EQ(v[0], INT64_MAX);
  for (size_t i = 1; i < v.size(); ++i) EXPECT_FALSE(v[i].has_value()) << i;
}

TEST(JsonWriter, EscapesLikeGoAndRoundTripsThroughTheReader) {
  JsonWriter w;
  const std::string tricky = "a<b>&\"c\\\n\x01\xE2\x82\xAC";
  w.BeginObject().Key("k").String(tricky).Key("n").Int(-5).Key("z").Null().Key("l");
  w.BeginArray().Bool(true).Raw(R"({"x":1})").EndArray().EndObject();
  EXPECT_EQ(w.str(),
            R"({"k":"a\u003cb\u003e\u0026\"c\\\n\u0001)"
            "\xE2\x82\xAC"
            R"(","n":-5,"z":null,"l":[true,{"x":1}]})");
  JsonDoc doc = Parse(w.str());
  EXPECT_EQ(doc.root().Get("k").StringOr(), tricky);
}

// Error messages quote request bytes; found by the fuzzer: a stray 0x85 in a request made
// the Error string invalid UTF-8, so the whole response was not JSON. As Go writes it:
// invalid bytes become U+FFFD, U+2028/2029 are escaped, valid multi-byte text is kept.
TEST(JsonWriter, InvalidUtf8BecomesReplacementCharacterLikeGo) {
  std::string out;
  AppendJsonString("a\x85" "b\xC3\xA9\xE2\x80\xA8\xF0\x9F\x98\x80\xED\xA0\x80\xC0\xAF\xE2\x82", out);
  EXPECT_EQ(out,
            "\"a\\ufffdb\xC3\xA9\\u2028\xF0\x9F\x98\x80\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"
            "\\ufffd\\ufffd\"");
  const std::string text = "{\"k\":" + out + "}";  // a JsonDoc views its text
  JsonDoc doc = Parse(text);
  EXPECT_TRUE(doc.root().Get("k").StringOr().starts_with("a\xEF\xBF\xBD" "b\xC3\xA9"));
}

}  // namespace
}  // namespace gpusched::extender
