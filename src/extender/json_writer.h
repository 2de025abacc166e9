#pragma once
// JsonWriter: appends compact JSON to a string. Commas are placed automatically; Raw()
// splices bytes that are already JSON (an input Node object handed back unchanged).
//
// Strings are escaped the way Go's encoding/json does by default, including the HTML-safe
// \u003c, \u003e and \u0026, so what the extender sends reads like what kube-scheduler
// itself would have produced. Invalid UTF-8 is passed through as it came.
//
// Thread-safety: none (one writer per response).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpusched::extender {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  // An object key; the next call writes its value.
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view s);
  JsonWriter& Int(int64_t v);
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  // REQUIRES: `json` is one complete JSON value.
  JsonWriter& Raw(std::string_view json);

  const std::string& str() const { return out_; }
  std::string Take() { return std::move(out_); }
  void Reserve(size_t n) { out_.reserve(n); }

 private:
  void Separate();

  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written into it yet
  bool after_key_ = false;
};

// True when `s` is well-formed UTF-8 (what Go's encoder always writes).
bool IsValidUtf8(std::string_view s);
// Appends `s` as a quoted, escaped JSON string, as Go writes it (invalid UTF-8 as U+FFFD).
void AppendJsonString(std::string_view s, std::string& out);

}  // namespace gpusched::extender
