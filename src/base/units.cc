#include "base/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace gpusched {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "1.5GiB" into the number 1.5 and the suffix "gib" (lower-cased, trimmed).
bool SplitNumber(std::string_view text, double* number, std::string* suffix) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
                             (i == 0 && (text[i] == '-' || text[i] == '+')))) {
    ++i;
  }
  if (i == 0) return false;
  std::string num(text.substr(0, i));
  char* end = nullptr;
  *number = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(*number)) return false;
  *suffix = Lower(text.substr(i));
  while (!suffix->empty() && suffix->front() == ' ') suffix->erase(0, 1);
  return true;
}

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

constexpr double kBytesPerMiB = 1024.0 * 1024;

StatusOr<MiB> ParseSizeMiB(std::string_view text, std::string_view field) {
  double number = 0;
  std::string suffix;
  if (!SplitNumber(text, &number, &suffix)) {
    return InvalidArgument(std::string(field) + ": " + Quote(text) +
                           " is not a size (use e.g. 512MiB or 80GiB)");
  }
  double scale = 0;
  if (suffix.empty() || suffix == "mib" || suffix == "m" || suffix == "mi") scale = 1;
  else if (suffix == "gib" || suffix == "g" || suffix == "gi") scale = 1024;
  else if (suffix == "tib" || suffix == "t" || suffix == "ti") scale = 1024.0 * 1024;
  // Decimal units, as GPU vendors and kubectl's G write them: 1GB = 10^9 bytes.
  else if (suffix == "mb") scale = 1e6 / kBytesPerMiB;
  else if (suffix == "gb") scale = 1e9 / kBytesPerMiB;
  else if (suffix == "tb") scale = 1e12 / kBytesPerMiB;
  else {
    return InvalidArgument(std::string(field) + ": unknown size unit " + Quote(suffix) + " in " +
                           Quote(text) + " (use MiB, GiB, TiB, or MB, GB, TB for powers of 10)");
  }
  if (number < 0) {
    return InvalidArgument(std::string(field) + ": must be >= 0, got " + Quote(text));
  }
  const double mib = number * scale;
  if (mib > 1e12) {
    return InvalidArgument(std::string(field) + ": " + Quote(text) + " is too large");
  }
  return static_cast<MiB>(std::llround(mib));
}

StatusOr<int64_t> ParseDurationMs(std::string_view text, std::string_view field) {
  double number = 0;
  std::string suffix;
  if (!SplitNumber(text, &number, &suffix)) {
    return InvalidArgument(std::string(field) + ": " + Quote(text) +
                           " is not a duration (use e.g. 30s, 5m or 2h)");
  }
  double scale = 0;
  if (suffix == "ms") scale = 1;
  else if (suffix.empty() || suffix == "s") scale = 1000;
  else if (suffix == "m" || suffix == "min") scale = 60'000;
  else if (suffix == "h") scale = 3'600'000;
  else if (suffix == "d") scale = 86'400'000;
  else {
    return InvalidArgument(std::string(field) + ": unknown duration unit " + Quote(suffix) +
                           " in " + Quote(text) + " (use ms, s, m, h or d)");
  }
  const double ms = number * scale;
  if (ms < 0) return InvalidArgument(std::string(field) + ": must be >= 0, got " + Quote(text));
  if (ms > 1e15) return InvalidArgument(std::string(field) + ": " + Quote(text) + " is too large");
  return static_cast<int64_t>(std::llround(ms));
}

StatusOr<int64_t> ParseCpuMilli(std::string_view text, std::string_view field) {
  double number = 0;
  std::string suffix;
  // Only a lower-case m: in Kubernetes' quantities "500M" is 500 million, not millicores.
  const bool upper_m = !text.empty() && text.find('M') != std::string_view::npos;
  if (!SplitNumber(text, &number, &suffix) || (!suffix.empty() && suffix != "m") || upper_m) {
    return InvalidArgument(std::string(field) + ": " + Quote(text) +
                           " is not a CPU amount (use 4 or 500m)");
  }
  const double milli = suffix == "m" ? number : number * 1000;
  if (milli < 0) return InvalidArgument(std::string(field) + ": must be >= 0, got " + Quote(text));
  if (milli > 1e15) return InvalidArgument(std::string(field) + ": " + Quote(text) + " is too large");
  return static_cast<int64_t>(std::llround(milli));
}

int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

namespace {

// Exactly `n` digits at text[pos...]; -1 when not.
int64_t Digits(std::string_view text, size_t pos, size_t n) {
  if (pos + n > text.size()) return -1;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }
}  // namespace

StatusOr<int64_t> ParseTimePointMs(std::string_view text, std::string_view field, int64_t now_ms) {
  const std::string bad = std::string(field) + ": " + Quote(text) +
                          " is not a date (2026-11-30 or 2026-11-30T12:00:00Z, UTC) nor a time "
                          "ago (7d, 12h, 30m)";
  if (text.size() >= 10 && text[4] == '-' && text[7] == '-') {
    const int64_t y = Digits(text, 0, 4), mo = Digits(text, 5, 2), d = Digits(text, 8, 2);
    static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 ||
        d > kDays[mo - 1] + (mo == 2 && IsLeap(y) ? 1 : 0)) {
      return InvalidArgument(bad);
    }
    int64_t secs = DaysFromCivil(y, mo, d) * 86'400;
    if (text.size() == 10) return secs * 1000;
    if (text.size() != 20 || text[10] != 'T' || text[13] != ':' || text[16] != ':' ||
        text[19] != 'Z') {
      return InvalidArgument(bad);
    }
    const int64_t h = Digits(text, 11, 2), mi = Digits(text, 14, 2), s = Digits(text, 17, 2);
    if (h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 59) return InvalidArgument(bad);
    secs += h * 3600 + mi * 60 + s;
    return secs * 1000;
  }
  if (text.empty() || !(text.back() >= 'a' && text.back() <= 'z')) return InvalidArgument(bad);
  StatusOr<int64_t> ago = ParseDurationMs(text, field);
  if (!ago.ok()) return InvalidArgument(bad);
  return now_ms - *ago;
}

std::string FormatSizeMiB(MiB mib) {
  char buf[64];
  if (mib >= 1024 && mib % 1024 == 0) {
    std::snprintf(buf, sizeof buf, "%lldGiB", static_cast<long long>(mib / 1024));
  } else if (mib >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1fGiB", static_cast<double>(mib) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%lldMiB", static_cast<long long>(mib));
  }
  return buf;
}

std::string FormatDurationMs(int64_t ms) {
  if (ms < 1000) return std::to_string(ms) + "ms";
  int64_t s = ms / 1000;
  std::string out;
  if (s >= 3600) { out += std::to_string(s / 3600) + "h"; s %= 3600; }
  if (s >= 60) { out += std::to_string(s / 60) + "m"; s %= 60; }
  if (s > 0 || out.empty()) out += std::to_string(s) + "s";
  return out;
}

StatusOr<std::vector<std::string_view>> SplitCountSpec(std::string_view text, size_t min_parts,
                                                       size_t max_parts, std::string_view field,
                                                       std::string_view form) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t x = text.find('x', start);
    parts.push_back(text.substr(start, x == std::string_view::npos ? x : x - start));
    if (x == std::string_view::npos || parts.size() > max_parts) break;
    start = x + 1;
  }
  bool ok = parts.size() >= min_parts && parts.size() <= max_parts;
  for (std::string_view p : parts) ok = ok && !p.empty();
  if (!ok) return InvalidArgument(std::string(field) + ": " + Quote(text) + " is not " + std::string(form));
  return parts;
}

StatusOr<int64_t> ParseWholeNumber(std::string_view text, int64_t lo, int64_t hi,
                                   std::string_view field) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
  const auto r = std::from_chars(text.data(), end, v);
  if (!digits || r.ec != std::errc() || r.ptr != end || v < lo || v > hi) {
    return InvalidArgument(std::string(field) + ": " + Quote(text) + " is not a whole number from " +
                           std::to_string(lo) + " to " + std::to_string(hi));
  }
  return v;
}

StatusOr<IndexRange> ParseIndexRange(std::string_view text, int64_t max_count,
                                     std::string_view field) {
  constexpr int64_t kMaxIndex = 1'000'000'000;
  const auto bad = [&](const std::string& why) {
    return InvalidArgument(std::string(field) + ": " + Quote(text) + " " + why);
  };
  const size_t dash = text.find('-');
  const std::string_view a = text.substr(0, dash);
  const std::string_view b = dash == std::string_view::npos ? a : text.substr(dash + 1);
  auto first = ParseWholeNumber(a, 0, kMaxIndex, field);
  auto last = ParseWholeNumber(b, 0, kMaxIndex, field);
  if (!first.ok() || !last.ok()) {
    return bad("is not an index range A-B (whole numbers from 0 to " +
               std::to_string(kMaxIndex) + ", e.g. 0-99) or one index");
  }
  if (*last < *first) return bad("ends before it starts");
  IndexRange r{*first, *last};
  if (r.count() > max_count) {
    return bad("has " + std::to_string(r.count()) + " indices; at most " +
               std::to_string(max_count) + " in one array");
  }
  return r;
}

}  // namespace gpusched
