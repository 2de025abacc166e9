#include "sim/csv_fields.h"

#include <charconv>
#include <cmath>

namespace gpusched::sim {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

}  // namespace

std::vector<std::string_view> SplitCsvLine(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(Trim(line.substr(start)));
      return out;
    }
    out.push_back(Trim(line.substr(start, comma - start)));
    start = comma + 1;
  }
}

CsvHeader::CsvHeader(std::vector<std::string_view> names) {
  for (std::string_view n : names) {
    if (!n.empty() && n.front() == '#') n.remove_prefix(1);
    names_.emplace_back(n);
  }
}

int CsvHeader::Find(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::string CsvPos::Prefix(std::string_view field) const {
  return *file + ":" + std::to_string(line) + ": field " + std::string(field) + ": ";
}

StatusOr<int64_t> ParseInt(std::string_view text, const CsvPos& pos, std::string_view field) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && ptr == text.data() + text.size() && !text.empty()) return v;
  // Accept integral decimals such as "8.0".
  auto real = ParseReal(text, pos, field);
  if (real.ok() && *real == std::floor(*real) && std::fabs(*real) < 9e15) {
    return static_cast<int64_t>(*real);
  }
  return InvalidArgument(pos.Prefix(field) + "\"" + std::string(text) + "\" is not an integer");
}

StatusOr<double> ParseReal(std::string_view text, const CsvPos& pos, std::string_view field) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || !std::isfinite(v)) {
    return InvalidArgument(pos.Prefix(field) + "\"" + std::string(text) + "\" is not a number");
  }
  return v;
}

StatusOr<int64_t> ParseSecondsToMs(std::string_view text, const CsvPos& pos,
                                   std::string_view field) {
  GS_ASSIGN_OR_RETURN(double s, ParseReal(text, pos, field));
  if (s < 0) {
    return InvalidArgument(pos.Prefix(field) + "must be >= 0 seconds, got " + std::string(text));
  }
  // llround has no int64 answer beyond ~9.2e18 ms; this leaves headroom for sums of times.
  if (s > kMaxSeconds) {
    return InvalidArgument(pos.Prefix(field) + "\"" + std::string(text) +
                           "\" is too large (at most " + std::to_string(kMaxSeconds) +
                           " seconds)");
  }
  return static_cast<int64_t>(std::llround(s * 1000.0));
}

}  // namespace gpusched::sim
