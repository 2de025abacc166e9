#include "base/log.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdio>
#include <ctime>
#include <memory>

namespace gpusched::logging {
namespace {

constexpr const char* kLevelNames[] = {"trace", "debug", "info", "warn", "error"};
constexpr const char* kLevelTags[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR"};

void AppendHex(std::string& out, const char* prefix, unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%s%0*X", prefix, digits, value);
  out += buf;
}

// The two-character escape of a newline, carriage return or tab (the same in JSON and text);
// nullptr for any other byte.
const char* ShortEscape(unsigned char c) {
  switch (c) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return nullptr;
  }
}

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t Utf8Length(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  unsigned min = 0;
  unsigned cp = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) n = 2, min = 0x80, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) n = 3, min = 0x800, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) n = 4, min = 0x10000, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (const char* escape = ShortEscape(c)) {
      out += escape;
    } else if (c < 0x20 || c == 0x7F) {
      AppendHex(out, "\\u", c, 4);
    } else if (c >= 0x80) {
      const size_t n = Utf8Length(s, i);
      if (n == 0) {
        out += "\\uFFFD";
        ++i;
        continue;
      }
      out.append(s.substr(i, n));
      i += n;
      continue;
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  out += '"';
}

// Text: every byte as is, but control bytes escaped, so a record stays one line.
void AppendTextEscaped(std::string& out, std::string_view s) {
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (const char* escape = ShortEscape(c)) {
      out += escape;
    } else if (c < 0x20 || c == 0x7F) {
      AppendHex(out, "\\x", c, 2);
    } else {
      out += ch;
    }
  }
}

std::string RepeatNote(int64_t suppressed) {
  return " (and " + std::to_string(suppressed) + " more like it before)";
}

std::string FormatJson(TimeMs time_ms, Level level, std::string_view component,
                       std::string_view message, const Fields& fields, int64_t suppressed) {
  std::string out = "{\"time\":\"" + FormatTime(time_ms) + "\",\"level\":\"" +
                    LevelName(level) + "\",\"component\":";
  AppendJsonString(out, component);
  out += ",\"msg\":";
  AppendJsonString(out, suppressed > 0 ? std::string(message) + RepeatNote(suppressed)
                                       : std::string(message));
  if (fields.task) out += ",\"task\":" + std::to_string(*fields.task);
  if (!fields.node.empty()) {
    out += ",\"node\":";
    AppendJsonString(out, fields.node);
  }
  if (suppressed > 0) out += ",\"suppressed\":" + std::to_string(suppressed);
  out += "}\n";
  return out;
}

std::string FormatText(TimeMs time_ms, Level level, std::string_view component,
                       std::string_view message, const Fields& fields, int64_t suppressed) {
  std::string out = FormatTime(time_ms);
  out += ' ';
  out += kLevelTags[static_cast<int>(level)];
  out += ' ';
  AppendTextEscaped(out, component);
  if (fields.task) out += " [task " + std::to_string(*fields.task) + "]";
  if (!fields.node.empty()) {
    out += " [node ";
    AppendTextEscaped(out, fields.node);
    out += "]";
  }
  out += ' ';
  AppendTextEscaped(out, message);
  if (suppressed > 0) out += RepeatNote(suppressed);
  out += '\n';
  return out;
}

}  // namespace

StatusOr<Level> ParseLevel(std::string_view text, std::string_view field) {
  for (int i = 0; i < 5; ++i) {
    if (text == kLevelNames[i]) return static_cast<Level>(i);
  }
  return InvalidArgument(std::string(field) + ": \"" + std::string(text) +
                         "\" is not a log level (trace, debug, info, warn or error)");
}

StatusOr<Format> ParseFormat(std::string_view text, std::string_view field) {
  if (text == "text") return Format::kText;
  if (text == "json") return Format::kJson;
  return InvalidArgument(std::string(field) + ": \"" + std::string(text) +
                         "\" is not a log format (text or json)");
}

const char* LevelName(Level level) { return kLevelNames[static_cast<int>(level)]; }

std::string FormatTime(TimeMs time_ms) {
  const std::time_t secs = static_cast<std::time_t>(time_ms >= 0 ? time_ms / 1000
                                                                 : (time_ms - 999) / 1000);
  const int ms = static_cast<int>(time_ms - static_cast<TimeMs>(secs) * 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[80];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

std::string FormatLine(Format format, TimeMs time_ms, Level level, std::string_view component,
                       std::string_view message, const Fields& fields, int64_t suppressed) {
  return format == Format::kJson
             ? FormatJson(time_ms, level, component, message, fields, suppressed)
             : FormatText(time_ms, level, component, message, fields, suppressed);
}

int64_t RepeatedLines::Admit(const std::string& key) {
  const int64_t now = clock_.MonoMs();
  std::lock_guard<std::mutex> lock(mu_);
  if (seen_.size() >= kMaxRemembered && seen_.count(key) == 0) seen_.clear();
  auto [it, fresh] = seen_.try_emplace(key, Seen{now, 0});
  if (fresh) return 0;
  if (now - it->second.written_ms < kWindowMs) {
    ++it->second.held;
    return -1;
  }
  const int64_t held = it->second.held;
  it->second = Seen{now, 0};
  return held;
}

void Logger::Configure(Level min_level, Format format) {
  std::lock_guard<std::mutex> lock(mu_);
  min_level_ = min_level;
  format_ = format;
}

bool Logger::Enabled(Level level) const {
  std::lock_guard<std::mutex> lock(mu_);
  return level >= min_level_;
}

Format Logger::format() const {
  std::lock_guard<std::mutex> lock(mu_);
  return format_;
}

void Logger::Log(Level level, std::string_view component, std::string_view message,
                 const Fields& fields) {
  Format format = Format::kText;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (level < min_level_) return;
    format = format_;
  }
  int64_t suppressed = 0;
  if (!fields.repeat_key.empty() || level >= Level::kWarn) {
    const std::string_view key = fields.repeat_key.empty() ? message : fields.repeat_key;
    suppressed = repeats_.Admit(std::string(component) + "\n" + std::string(key));
    if (suppressed < 0) return;
  }
  sink_(FormatLine(format, clock_.NowMs(), level, component, message, fields, suppressed));
}

Logger& Default() {
  // Never destroyed: threads (gRPC's among them) log until the process ends.
  static Logger* logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto out = std::make_shared<spdlog::logger>("gpusched", sink);
    out->set_pattern("%v", spdlog::pattern_time_type::utc);
    out->set_level(spdlog::level::trace);
    out->flush_on(spdlog::level::trace);
    static RealClock* clock = new RealClock();
    return new Logger(*clock, [out](std::string_view line) {
      // The line is formatted already; spdlog adds the end of line back.
      if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
      out->log(spdlog::level::info, spdlog::string_view_t(line.data(), line.size()));
    });
  }();
  return *logger;
}

}  // namespace gpusched::logging
