#pragma once
// Minimal CSV field access for the trace and node-list loaders: comma-separated, no quoting
// (none of the supported files quote), header columns looked up by name. Number parsers
// return errors naming "FILE:LINE: field NAME: ..." with the offending value.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpusched::sim {

// Splits one line on commas; strips a trailing '\r' and spaces around fields.
std::vector<std::string_view> SplitCsvLine(std::string_view line);

// Column positions by header name.
class CsvHeader {
 public:
  explicit CsvHeader(std::vector<std::string_view> names);
  // Index of `name`, -1 when absent.
  int Find(std::string_view name) const;
  size_t size() const { return names_.size(); }

 private:
  std::vector<std::string> names_;
};

// Where a value came from, for error messages.
struct CsvPos {
  const std::string* file;
  int64_t line;
  std::string Prefix(std::string_view field) const;  // "FILE:LINE: field NAME: "
};

StatusOr<int64_t> ParseInt(std::string_view text, const CsvPos& pos, std::string_view field);
StatusOr<double> ParseReal(std::string_view text, const CsvPos& pos, std::string_view field);
// Seconds (integer or decimal) to milliseconds, rounded to the nearest ms; must be in
// [0, kMaxSeconds] (about 31,000 years, far beyond any trace).
inline constexpr int64_t kMaxSeconds = 1'000'000'000'000;
StatusOr<int64_t> ParseSecondsToMs(std::string_view text, const CsvPos& pos,
                                   std::string_view field);

}  // namespace gpusched::sim
