#include "cli/output.h"

#include <algorithm>
#include <ostream>

#include "base/units.h"

namespace gpusched::cli {

std::string JoinInts(const google::protobuf::RepeatedField<int32_t>& v) {
  std::string s;
  for (int i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v.Get(i));
  return s;
}

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

std::string Age(int64_t at_ms, int64_t now_ms) {
  if (at_ms <= 0) return "-";
  return FormatDurationMs(std::max<int64_t>(0, now_ms - at_ms)) + " ago";
}

}  // namespace gpusched::cli
