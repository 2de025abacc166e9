#include "extender/json_reader.h"

#include <array>
#include <charconv>
#include <cstring>

namespace gpusched::extender {
namespace {

// Bytes that end the fast scan of a string body: the closing quote, an escape, and the
// control characters JSON forbids inside strings.
constexpr std::array<bool, 256> MakeStringStops() {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[static_cast<size_t>(c)] = true;
  t['"'] = true;
  t['\\'] = true;
  return t;
}
constexpr std::array<bool, 256> kStringStops = MakeStringStops();

// SWAR scan of 8 bytes at a time for the string stops: nonzero when one of the 8 bytes is
// '"', '\\' or below 0x20 (it may also flag bytes after a real stop; the byte loop that
// follows decides).
constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHighs = 0x8080808080808080ULL;
inline uint64_t ZeroByteIn(uint64_t v) { return (v - kOnes) & ~v & kHighs; }
inline uint64_t StopIn(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return ZeroByteIn(w ^ (kOnes * '"')) | ZeroByteIn(w ^ (kOnes * '\\')) |
         ((w - kOnes * 0x20) & ~w & kHighs);
}

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

char LowerAscii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualFold(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (LowerAscii(a[i]) != LowerAscii(b[i])) return false;
  }
  return true;
}

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The value of four hex digits at s[at..at+3], or -1 when one is not a hex digit.
// REQUIRES: at + 4 <= s.size().
int64_t Hex4(std::string_view s, size_t at) {
  int64_t v = 0;
  for (size_t k = 0; k < 4; ++k) {
    const int d = HexValue(s[at + k]);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace

// The parser proper: an explicit stack of open containers instead of recursion, so hostile
// nesting cannot overflow the call stack.
class JsonParser {
 public:
  JsonParser(std::string_view text, std::string_view what, JsonDoc& doc)
      : s_(text), what_(what), doc_(doc) {}

  Status Run();

 private:
  enum class Expect { kValue, kKeyOrClose, kKey, kValueOrClose, kCommaOrClose };

  Status Error(const std::string& message) const {
    return InvalidArgument(std::string(what_) + ": invalid JSON at byte " + std::to_string(p_) +
                           ": " + message);
  }
  void SkipSpace() {
    while (p_ < s_.size() && IsSpace(s_[p_])) ++p_;
  }
  uint32_t Push(JsonType type, size_t begin, size_t end) {
    JsonDoc::Token t;
    t.type = type;
    t.begin = static_cast<uint32_t>(begin);
    t.end = static_cast<uint32_t>(end);
    doc_.tokens_.push_back(t);
    const auto index = static_cast<uint32_t>(doc_.tokens_.size() - 1);
    doc_.tokens_.back().next = index + 1;
    return index;
  }
  Status ParseString();
  Status ParseNumber();
  Status ParseLiteral();
  Status ParseValue(Expect& expect);
  void ValueDone(Expect& expect);
  Status CloseContainer(char close, Expect& expect);

  std::string_view s_;
  std::string_view what_;
  JsonDoc& doc_;
  size_t p_ = 0;
  std::vector<uint32_t> open_;  // token indices of the containers being filled
};

Status JsonParser::ParseString() {
  // REQUIRES: s_[p_] == '"'.
  const size_t begin = ++p_;
  bool escaped = false;
  const size_t n = s_.size();
  while (true) {
    while (p_ + 8 <= n && StopIn(s_.data() + p_) == 0) p_ += 8;
    while (p_ < n && !kStringStops[static_cast<unsigned char>(s_[p_])]) ++p_;
    if (p_ >= n) return Error("unterminated string");
    const char c = s_[p_];
    if (c == '"') break;
    if (c != '\\') return Error("control character inside a string");
    escaped = true;
    if (p_ + 1 >= n) return Error("unterminated string");
    const char e = s_[p_ + 1];
    if (e == 'u') {
      if (p_ + 6 > n) return Error("truncated \\u escape");
      for (size_t k = 2; k < 6; ++k) {
        if (HexValue(s_[p_ + k]) < 0) return Error("bad hex digit in \\u escape");
      }
      p_ += 6;
    } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
               e == 'r' || e == 't') {
      p_ += 2;
    } else {
      return Error("unknown escape \\" + std::string(1, e));
    }
  }
  const uint32_t index = Push(JsonType::kString, begin, p_);
  doc_.tokens_[index].escaped = escaped;
  ++p_;  // closing quote
  return Status::Ok();
}

Status JsonParser::ParseNumber() {
  const size_t begin = p_;
  const size_t n = s_.size();
  if (s_[p_] == '-') ++p_;
  if (p_ >= n || !IsDigit(s_[p_])) return Error("expected a digit");
  if (s_[p_] == '0') {
    ++p_;
  } else {
    while (p_ < n && IsDigit(s_[p_])) ++p_;
  }
  if (p_ < n && s_[p_] == '.') {
    ++p_;
    if (p_ >= n || !IsDigit(s_[p_])) return Error("expected a digit after '.'");
    while (p_ < n && IsDigit(s_[p_])) ++p_;
  }
  if (p_ < n && (s_[p_] == 'e' || s_[p_] == 'E')) {
    ++p_;
    if (p_ < n && (s_[p_] == '+' || s_[p_] == '-')) ++p_;
    if (p_ >= n || !IsDigit(s_[p_])) return Error("expected a digit in the exponent");
    while (p_ < n && IsDigit(s_[p_])) ++p_;
  }
  Push(JsonType::kNumber, begin, p_);
  return Status::Ok();
}

Status JsonParser::ParseLiteral() {
  static constexpr std::pair<std::string_view, JsonType> kLiterals[] = {
      {"true", JsonType::kTrue}, {"false", JsonType::kFalse}, {"null", JsonType::kNull}};
  for (const auto& [word, type] : kLiterals) {
    if (s_.substr(p_, word.size()) == word) {
      Push(type, p_, p_ + word.size());
      p_ += word.size();
      return Status::Ok();
    }
  }
  return Error("unexpected character '" + std::string(1, s_[p_]) + "'");
}

// A value just completed (scalar or closed container): count it in its parent.
void JsonParser::ValueDone(Expect& expect) {
  if (!open_.empty()) ++doc_.tokens_[open_.back()].count;
  expect = Expect::kCommaOrClose;
}

Status JsonParser::ParseValue(Expect& expect) {
  if (p_ >= s_.size()) return Error("unexpected end of input, expected a value");
  const char c = s_[p_];
  if (c == '{' || c == '[') {
    if (open_.size() >= JsonDoc::kMaxDepth) return Error("nested deeper than 256 levels");
    open_.push_back(Push(c == '{' ? JsonType::kObject : JsonType::kArray, p_, p_ + 1));
    ++p_;
    expect = c == '{' ? Expect::kKeyOrClose : Expect::kValueOrClose;
    return Status::Ok();
  }
  Status st;
  if (c == '"') {
    st = ParseString();
  } else if (c == '-' || IsDigit(c)) {
    st = ParseNumber();
  } else {
    st = ParseLiteral();
  }
  if (!st.ok()) return st;
  ValueDone(expect);
  return Status::Ok();
}

Status JsonParser::CloseContainer(char close, Expect& expect) {
  const uint32_t index = open_.back();
  JsonDoc::Token& t = doc_.tokens_[index];
  const char want = t.type == JsonType::kObject ? '}' : ']';
  if (close != want) return Error(std::string("expected '") + want + "'");
  ++p_;
  t.end = static_cast<uint32_t>(p_);
  t.next = static_cast<uint32_t>(doc_.tokens_.size());
  open_.pop_back();
  ValueDone(expect);
  return Status::Ok();
}

Status JsonParser::Run() {
  if (s_.size() > JsonDoc::kMaxBytes) {
    return InvalidArgument(std::string(what_) + ": body of " + std::to_string(s_.size()) +
                           " bytes is larger than the 1 GiB limit");
  }
  doc_.tokens_.reserve(s_.size() / 12 + 4);
  Expect expect = Expect::kValue;
  while (true) {
    SkipSpace();
    switch (expect) {
      case Expect::kValue:
        GS_RETURN_IF_ERROR(ParseValue(expect));
        break;
      case Expect::kValueOrClose:
        if (p_ < s_.size() && s_[p_] == ']') {
          GS_RETURN_IF_ERROR(CloseContainer(']', expect));
        } else {
          GS_RETURN_IF_ERROR(ParseValue(expect));
        }
        break;
      case Expect::kKeyOrClose:
      case Expect::kKey:
        if (expect == Expect::kKeyOrClose && p_ < s_.size() && s_[p_] == '}') {
          GS_RETURN_IF_ERROR(CloseContainer('}', expect));
          break;
        }
        if (p_ >= s_.size() || s_[p_] != '"') return Error("expected a string key");
        GS_RETURN_IF_ERROR(ParseString());
        SkipSpace();
        if (p_ >= s_.size() || s_[p_] != ':') return Error("expected ':' after an object key");
        ++p_;
        expect = Expect::kValue;
        break;
      case Expect::kCommaOrClose: {
        if (open_.empty()) {
          if (p_ != s_.size()) return Error("unexpected data after the JSON value");
          return Status::Ok();
        }
        if (p_ >= s_.size()) return Error("unexpected end of input");
        const char c = s_[p_];
        if (c == ',') {
          ++p_;
          expect = doc_.tokens_[open_.back()].type == JsonType::kObject ? Expect::kKey
                                                                        : Expect::kValue;
        } else if (c == '}' || c == ']') {
          GS_RETURN_IF_ERROR(CloseContainer(c, expect));
        } else {
          return Error("expected ',' or the end of the container");
        }
        break;
      }
    }
  }
}

StatusOr<JsonDoc> JsonDoc::Parse(std::string_view text, std::string_view what) {
  JsonDoc doc;
  doc.text_ = text;
  JsonParser parser(text, what, doc);
  GS_RETURN_IF_ERROR(parser.Run());
  return doc;
}

std::string DecodeJsonString(std::string_view body) {
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out += c;
      continue;
    }
    const char e = body[++i];
    switch (e) {
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        const int64_t high = i + 4 < body.size() ? Hex4(body, i + 1) : -1;
        if (high < 0) {  // only when called on text the parser did not validate
          out += "\xEF\xBF\xBD";
          i = body.size();
          break;
        }
        uint32_t cp = static_cast<uint32_t>(high);
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < body.size() && body[i + 1] == '\\' &&
            body[i + 2] == 'u') {
          const int64_t low = Hex4(body, i + 3);
          if (low >= 0xDC00 && low < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<uint32_t>(low) - 0xDC00);
            i += 6;
          } else {
            cp = 0xFFFD;
          }
        } else if (cp >= 0xD800 && cp < 0xE000) {
          cp = 0xFFFD;  // a lone surrogate, as Go decodes it
        }
        AppendUtf8(cp, out);
        break;
      }
      default: out += e; break;  // " \ /
    }
  }
  return out;
}

// ---- JsonValue ----

JsonType JsonValue::type() const {
  return doc_ == nullptr ? JsonType::kNull : doc_->tokens_[index_].type;
}

uint32_t JsonValue::next() const { return doc_->tokens_[index_].next; }

std::string_view JsonValue::raw() const {
  if (doc_ == nullptr) return {};
  const JsonDoc::Token& t = doc_->tokens_[index_];
  if (t.type == JsonType::kString) return doc_->text_.substr(t.begin - 1, t.end - t.begin + 2);
  return doc_->text_.substr(t.begin, t.end - t.begin);
}

size_t JsonValue::size() const {
  const JsonType t = type();
  if (t != JsonType::kObject && t != JsonType::kArray) return 0;
  return doc_->tokens_[index_].count;
}

JsonValue JsonValue::Get(std::string_view key) const {
  JsonValue found;
  ForEachMember([&](std::string_view k, JsonValue v) {
    if (k != key) return true;
    found = v;
    return false;
  });
  return found;
}

JsonValue JsonValue::GetFold(std::string_view key) const {
  JsonValue exact, folded;
  ForEachMember([&](std::string_view k, JsonValue v) {
    if (k == key) {
      exact = v;
      return false;
    }
    if (!folded.present() && EqualFold(k, key)) folded = v;
    return true;
  });
  return exact.present() ? exact : folded;
}

std::optional<std::string> JsonValue::String() const {
  if (type() != JsonType::kString) return std::nullopt;
  const JsonDoc::Token& t = doc_->tokens_[index_];
  const std::string_view body = doc_->text_.substr(t.begin, t.end - t.begin);
  return t.escaped ? DecodeJsonString(body) : std::string(body);
}

std::string JsonValue::StringOr(std::string_view fallback) const {
  auto s = String();
  return s ? std::move(*s) : std::string(fallback);
}

bool JsonValue::StringEquals(std::string_view s) const {
  if (type() != JsonType::kString) return false;
  const JsonDoc::Token& t = doc_->tokens_[index_];
  const std::string_view body = doc_->text_.substr(t.begin, t.end - t.begin);
  return t.escaped ? DecodeJsonString(body) == s : body == s;
}

std::optional<int64_t> JsonValue::Int() const {
  if (type() != JsonType::kNumber) return std::nullopt;
  const std::string_view r = raw();
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(r.data(), r.data() + r.size(), v);
  if (ec != std::errc() || ptr != r.data() + r.size()) return std::nullopt;
  return v;
}

std::optional<bool> JsonValue::Bool() const {
  const JsonType t = type();
  if (t == JsonType::kTrue) return true;
  if (t == JsonType::kFalse) return false;
  return std::nullopt;
}

}  // namespace gpusched::extender
