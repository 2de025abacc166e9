#include "sim/trace.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "base/units.h"
#include "sim/csv_fields.h"

namespace gpusched::sim {
namespace {

// Parses one data row into a job. `cols` are the column indices the format needs.
using RowParser = std::function<Status(const std::vector<std::string_view>&, const CsvPos&,
                                       TraceJob&)>;

struct Column {
  const char* name;
  bool required;
};

// Looks up every column; errors name the file and the missing column.
StatusOr<std::vector<int>> FindColumns(const CsvHeader& header, const std::vector<Column>& want,
                                       const std::string& file) {
  std::vector<int> out;
  for (const Column& c : want) {
    const int i = header.Find(c.name);
    if (i < 0 && c.required) {
      return InvalidArgument(file + ":1: header: missing column \"" + c.name + "\"");
    }
    out.push_back(i);
  }
  return out;
}

std::string_view Field(const std::vector<std::string_view>& f, int index) {
  return index >= 0 && static_cast<size_t>(index) < f.size() ? f[index] : std::string_view();
}

// "YYYY-MM-DD HH:MM:SS" (no time zone) to seconds since the epoch.
StatusOr<int64_t> ParseTimestamp(std::string_view s, const CsvPos& pos, std::string_view field) {
  auto bad = [&] {
    return InvalidArgument(pos.Prefix(field) + "\"" + std::string(s) +
                           "\" is not a YYYY-MM-DD HH:MM:SS timestamp");
  };
  if (s.size() != 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' ||
      s[16] != ':') {
    return bad();
  }
  int64_t v[6];
  const size_t at[6] = {0, 5, 8, 11, 14, 17}, len[6] = {4, 2, 2, 2, 2, 2};
  for (int i = 0; i < 6; ++i) {
    auto n = ParseInt(s.substr(at[i], len[i]), pos, field);
    if (!n.ok() || *n < 0) return bad();
    v[i] = *n;
  }
  if (v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 || v[5] > 60) {
    return bad();
  }
  return DaysFromCivil(v[0], v[1], v[2]) * 86400 + v[3] * 3600 + v[4] * 60 + v[5];
}

Status NonNegative(int64_t v, const CsvPos& pos, std::string_view field) {
  if (v >= 0) return Status::Ok();
  return InvalidArgument(pos.Prefix(field) + "must be >= 0, got " + std::to_string(v));
}

RowParser CsvRow(std::vector<int> c) {
  return [c](const auto& f, const CsvPos& pos, TraceJob& j) -> Status {
    j.id = std::string(Field(f, c[0]));
    GS_ASSIGN_OR_RETURN(j.num_gpu, ParseInt(Field(f, c[1]), pos, "num_gpu"));
    GS_RETURN_IF_ERROR(NonNegative(j.num_gpu, pos, "num_gpu"));
    GS_ASSIGN_OR_RETURN(j.submit_ms, ParseSecondsToMs(Field(f, c[2]), pos, "submit_time"));
    GS_ASSIGN_OR_RETURN(j.duration_ms, ParseSecondsToMs(Field(f, c[3]), pos, "duration"));
    const char* optional[3] = {"gpu_mem_mib", "cpu_milli", "mem_mib"};
    int64_t* target[3] = {&j.gpu_mem_mib, &j.cpu_milli, &j.mem_mib};
    for (int k = 0; k < 3; ++k) {
      if (Field(f, c[4 + k]).empty()) continue;
      GS_ASSIGN_OR_RETURN(*target[k], ParseInt(Field(f, c[4 + k]), pos, optional[k]));
      GS_RETURN_IF_ERROR(NonNegative(*target[k], pos, optional[k]));
    }
    j.cluster = std::string(Field(f, c[7]));
    return Status::Ok();
  };
}

RowParser PhillyRow(std::vector<int> c) {
  return [c](const auto& f, const CsvPos& pos, TraceJob& j) -> Status {
    GS_ASSIGN_OR_RETURN(int64_t ts, ParseTimestamp(Field(f, c[0]), pos, "timestamp"));
    j.submit_ms = ts * 1000;  // made relative to the earliest job after loading
    GS_ASSIGN_OR_RETURN(j.duration_ms, ParseSecondsToMs(Field(f, c[1]), pos, "duration"));
    GS_ASSIGN_OR_RETURN(j.num_gpu, ParseInt(Field(f, c[2]), pos, "num_gpus"));
    GS_RETURN_IF_ERROR(NonNegative(j.num_gpu, pos, "num_gpus"));
    j.cluster = std::string(Field(f, c[3]));
    j.id = std::to_string(pos.line - 1);  // data row number
    return Status::Ok();
  };
}

RowParser RfoldRow(std::vector<int> c) {
  return [c](const auto& f, const CsvPos& pos, TraceJob& j) -> Status {
    j.id = std::string(Field(f, c[0]));
    GS_ASSIGN_OR_RETURN(j.submit_ms, ParseSecondsToMs(Field(f, c[1]), pos, "arrival time (sec)"));
    GS_ASSIGN_OR_RETURN(j.num_gpu, ParseInt(Field(f, c[2]), pos, "size"));
    GS_RETURN_IF_ERROR(NonNegative(j.num_gpu, pos, "size"));
    GS_ASSIGN_OR_RETURN(j.duration_ms, ParseSecondsToMs(Field(f, c[3]), pos, "duration (sec)"));
    return Status::Ok();
  };
}

RowParser AlibabaRow(std::vector<int> c) {
  return [c](const auto& f, const CsvPos& pos, TraceJob& j) -> Status {
    j.id = std::string(Field(f, c[0]));
    GS_ASSIGN_OR_RETURN(j.cpu_milli, ParseInt(Field(f, c[1]), pos, "cpu_milli"));
    GS_ASSIGN_OR_RETURN(j.mem_mib, ParseInt(Field(f, c[2]), pos, "memory_mib"));
    GS_ASSIGN_OR_RETURN(j.num_gpu, ParseInt(Field(f, c[3]), pos, "num_gpu"));
    GS_ASSIGN_OR_RETURN(j.gpu_milli, ParseInt(Field(f, c[4]), pos, "gpu_milli"));
    GS_RETURN_IF_ERROR(NonNegative(j.cpu_milli, pos, "cpu_milli"));
    GS_RETURN_IF_ERROR(NonNegative(j.mem_mib, pos, "memory_mib"));
    GS_RETURN_IF_ERROR(NonNegative(j.num_gpu, pos, "num_gpu"));
    if (j.gpu_milli < 0 || j.gpu_milli > 1000) {
      return InvalidArgument(pos.Prefix("gpu_milli") + "must be in [0, 1000], got " +
                             std::to_string(j.gpu_milli));
    }
    if (j.num_gpu > 1 || j.gpu_milli == 0) j.gpu_milli = 1000;
    GS_ASSIGN_OR_RETURN(int64_t created, ParseInt(Field(f, c[5]), pos, "creation_time"));
    GS_ASSIGN_OR_RETURN(int64_t deleted, ParseInt(Field(f, c[6]), pos, "deletion_time"));
    int64_t started = created;
    if (!Field(f, c[7]).empty()) {
      GS_ASSIGN_OR_RETURN(started, ParseInt(Field(f, c[7]), pos, "scheduled_time"));
    }
    // Bounded so that the conversion to ms below cannot overflow.
    for (auto [v, field] : {std::pair{created, "creation_time"}, {deleted, "deletion_time"},
                            {started, "scheduled_time"}}) {
      if (v < 0 || v > kMaxSeconds) {
        return InvalidArgument(pos.Prefix(field) + "must be in [0, " +
                               std::to_string(kMaxSeconds) + "] seconds, got " +
                               std::to_string(v));
      }
    }
    if (deleted < started) {
      return InvalidArgument(pos.Prefix("deletion_time") + std::to_string(deleted) +
                             " is before the scheduled time " + std::to_string(started));
    }
    j.submit_ms = created * 1000;
    j.duration_ms = (deleted - started) * 1000;
    return Status::Ok();
  };
}

StatusOr<RowParser> MakeRowParser(TraceFormat format, const CsvHeader& h, const std::string& f) {
  switch (format) {
    case TraceFormat::kCsv: {
      GS_ASSIGN_OR_RETURN(auto c, FindColumns(h, {{"job_id", true}, {"num_gpu", true},
                                                  {"submit_time", true}, {"duration", true},
                                                  {"gpu_mem_mib", false}, {"cpu_milli", false},
                                                  {"mem_mib", false}, {"cluster", false}}, f));
      return CsvRow(c);
    }
    case TraceFormat::kPhilly: {
      GS_ASSIGN_OR_RETURN(auto c, FindColumns(h, {{"timestamp", true}, {"duration", true},
                                                  {"num_gpus", true}, {"cluster", false}}, f));
      return PhillyRow(c);
    }
    case TraceFormat::kPhillyRfold: {
      GS_ASSIGN_OR_RETURN(auto c, FindColumns(h, {{"job id", true}, {"arrival time (sec)", true},
                                                  {"size", true}, {"duration (sec)", true}}, f));
      return RfoldRow(c);
    }
    case TraceFormat::kAlibaba: {
      GS_ASSIGN_OR_RETURN(auto c, FindColumns(h, {{"name", true}, {"cpu_milli", true},
                                                  {"memory_mib", true}, {"num_gpu", true},
                                                  {"gpu_milli", true}, {"creation_time", true},
                                                  {"deletion_time", true},
                                                  {"scheduled_time", true}}, f));
      return AlibabaRow(c);
    }
  }
  return InvalidArgument("format: unknown");
}

}  // namespace

StatusOr<TraceFormat> ParseTraceFormat(std::string_view name) {
  for (TraceFormat f : {TraceFormat::kCsv, TraceFormat::kPhilly, TraceFormat::kPhillyRfold,
                        TraceFormat::kAlibaba}) {
    if (name == TraceFormatName(f)) return f;
  }
  return InvalidArgument("format: \"" + std::string(name) +
                         "\" is not one of csv, philly, philly-rfold, alibaba");
}

const char* TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kCsv: return "csv";
    case TraceFormat::kPhilly: return "philly";
    case TraceFormat::kPhillyRfold: return "philly-rfold";
    case TraceFormat::kAlibaba: return "alibaba";
  }
  return "unknown";
}

StatusOr<Trace> ParseTrace(std::istream& in, const std::string& name, TraceFormat format,
                           const LoadOptions& options) {
  Trace trace;
  trace.name = name;
  std::string line;
  if (!std::getline(in, line)) return InvalidArgument(name + ":1: empty file (no header)");
  const CsvHeader header(SplitCsvLine(line));
  GS_ASSIGN_OR_RETURN(RowParser parse, MakeRowParser(format, header, name));
  int64_t line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
    const std::vector<std::string_view> fields = SplitCsvLine(line);
    TraceJob job;
    job.line = line_no;
    const CsvPos pos{&name, line_no};
    Status s = fields.size() < header.size()
                   ? InvalidArgument(name + ":" + std::to_string(line_no) + ": " +
                                     std::to_string(fields.size()) + " fields, the header has " +
                                     std::to_string(header.size()))
                   : parse(fields, pos, job);
    if (!s.ok()) {
      if (!options.skip_bad_lines) return s;
      if (trace.skipped_lines++ == 0) trace.first_skipped_error = s.message();
      continue;
    }
    trace.jobs.push_back(std::move(job));
  }
  if (format == TraceFormat::kPhilly && !trace.jobs.empty()) {
    TimeMs first = std::numeric_limits<TimeMs>::max();
    for (const TraceJob& j : trace.jobs) first = std::min(first, j.submit_ms);
    for (TraceJob& j : trace.jobs) j.submit_ms -= first;
  }
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(), [](const TraceJob& a, const TraceJob& b) {
    return a.submit_ms != b.submit_ms ? a.submit_ms < b.submit_ms : a.line < b.line;
  });
  return trace;
}

StatusOr<Trace> LoadTrace(const std::string& path, TraceFormat format,
                          const LoadOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgument("trace: " + path + " is a directory, not a trace file");
  }
  std::ifstream in(path);
  if (!in) return NotFound("trace: cannot open " + path);
  return ParseTrace(in, path, format, options);
}

}  // namespace gpusched::sim
