#pragma once
// JsonDoc: a strict, one-pass JSON parser that records a flat "tape" of tokens (byte spans
// into the caller's text) instead of building a tree of allocated nodes, and JsonValue, a
// cheap handle to navigate it.
//
// Why not nlohmann::json: kube-scheduler's NodeList-mode requests carry every candidate Node
// object in full (about 3 KB each, 3 MB for 1,000 nodes); a DOM parse of that costs tens of
// milliseconds, while the extender reads a dozen fields per node and hands the rest back
// byte for byte (JsonValue::raw). The tape parse is one linear scan with no per-value
// allocation, and raw() makes "return the input node objects unchanged" a copy of bytes.
//
// Protocol rules built in (PROTOCOL.md section 1): a missing key and `null` look the same
// (an absent JsonValue is null); GetFold() matches keys the way Go's encoding/json does
// (exact match first, then case-insensitive); unknown keys are simply never read.
//
// Thread-safety: a parsed JsonDoc is immutable; JsonValues may be read from any thread.
// The text passed to Parse must outlive the JsonDoc and every JsonValue taken from it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpusched::extender {

enum class JsonType : uint8_t { kNull, kFalse, kTrue, kNumber, kString, kArray, kObject };

class JsonDoc;

class JsonValue {
 public:
  JsonValue() = default;  // absent: behaves as null

  bool present() const { return doc_ != nullptr; }
  JsonType type() const;
  bool is_null() const { return type() == JsonType::kNull; }
  bool is_object() const { return type() == JsonType::kObject; }
  bool is_array() const { return type() == JsonType::kArray; }
  bool is_string() const { return type() == JsonType::kString; }
  bool is_number() const { return type() == JsonType::kNumber; }
  bool is_bool() const { return type() == JsonType::kTrue || type() == JsonType::kFalse; }

  // The exact bytes of this value in the parsed text ("" when absent).
  std::string_view raw() const;

  // Object member by exact key; absent when this is not an object or has no such key.
  JsonValue Get(std::string_view key) const;
  // Object member the way Go decodes into an untagged struct field: an exact match wins,
  // else the first key equal ignoring ASCII case.
  JsonValue GetFold(std::string_view key) const;
  // Calls fn(key, value) for each member of an object, in order; stops when fn returns
  // false. Keys are decoded. Does nothing for a non-object.
  template <typename Fn>
  void ForEachMember(Fn&& fn) const;
  // Calls fn(value) for each element of an array, in order; stops when fn returns false.
  template <typename Fn>
  void ForEachItem(Fn&& fn) const;
  // Number of elements (array) or members (object); 0 otherwise.
  size_t size() const;

  // The decoded string; nullopt when not a string.
  std::optional<std::string> String() const;
  // The decoded string, or `fallback` when absent, null or not a string.
  std::string StringOr(std::string_view fallback = "") const;
  // True when this is a string whose decoded value equals `s` (no allocation when the
  // string has no escapes).
  bool StringEquals(std::string_view s) const;
  // An integral JSON number in int64 range; nullopt otherwise (1.5, 1e3, strings, ...).
  std::optional<int64_t> Int() const;
  std::optional<bool> Bool() const;

 private:
  friend class JsonDoc;
  JsonValue(const JsonDoc* doc, uint32_t index) : doc_(doc), index_(index) {}
  uint32_t next() const;  // index of the token after this value's subtree

  const JsonDoc* doc_ = nullptr;
  uint32_t index_ = 0;
};

class JsonDoc {
 public:
  // Most containers nested inside each other; deeper input is rejected (no recursion is
  // used, but Kubernetes objects never come close and a limit bounds the work stack).
  static constexpr size_t kMaxDepth = 256;
  // Largest text accepted (token offsets are 32-bit).
  static constexpr size_t kMaxBytes = size_t{1} << 30;

  // Parses exactly one JSON value (surrounding whitespace allowed). Errors are
  // InvalidArgument naming `what` and the byte offset, e.g.
  // `filter request: invalid JSON at byte 17: expected ':' after an object key`.
  static StatusOr<JsonDoc> Parse(std::string_view text, std::string_view what);

  JsonValue root() const { return tokens_.empty() ? JsonValue() : JsonValue(this, 0); }
  size_t token_count() const { return tokens_.size(); }

  JsonDoc(JsonDoc&&) noexcept = default;
  JsonDoc& operator=(JsonDoc&&) noexcept = default;
  JsonDoc(const JsonDoc&) = delete;
  JsonDoc& operator=(const JsonDoc&) = delete;

 private:
  friend class JsonValue;
  friend class JsonParser;
  JsonDoc() = default;

  struct Token {
    JsonType type = JsonType::kNull;
    bool escaped = false;  // strings: contains a backslash escape
    uint32_t begin = 0;    // strings: first byte after the opening quote; else first byte
    uint32_t end = 0;      // strings: the closing quote; else one past the last byte
    uint32_t next = 0;     // index of the token after this value (and its subtree)
    uint32_t count = 0;    // containers: number of elements / members
  };
  std::string_view text_;
  std::vector<Token> tokens_;
};

// Decodes the body of a JSON string (between the quotes) whose escapes were validated.
std::string DecodeJsonString(std::string_view body);

// ---- inline templates ----

template <typename Fn>
void JsonValue::ForEachMember(Fn&& fn) const {
  if (type() != JsonType::kObject) return;
  const auto& tokens = doc_->tokens_;
  uint32_t i = index_ + 1;
  const uint32_t end = next();
  while (i < end) {
    const JsonDoc::Token& key = tokens[i];
    const std::string_view body = doc_->text_.substr(key.begin, key.end - key.begin);
    const JsonValue value(doc_, i + 1);
    bool go_on;
    if (key.escaped) {
      go_on = fn(std::string_view(DecodeJsonString(body)), value);
    } else {
      go_on = fn(body, value);
    }
    if (!go_on) return;
    i = value.next();
  }
}

template <typename Fn>
void JsonValue::ForEachItem(Fn&& fn) const {
  if (type() != JsonType::kArray) return;
  uint32_t i = index_ + 1;
  const uint32_t end = next();
  while (i < end) {
    const JsonValue item(doc_, i);
    if (!fn(item)) return;
    i = item.next();
  }
}

}  // namespace gpusched::extender
