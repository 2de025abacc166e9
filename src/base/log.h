#pragma once
// The one logger of the daemons (server, agent, store, extender, rpc): every line they write
// goes through Log, with its time, level, component and the task or node it concerns, as
// text or as JSON lines (issue 39).
//
//   text: 2026-12-04T12:00:00.123Z INFO server [task 7] [node n1] message
//   json: {"time":"2026-12-04T12:00:00.123Z","level":"info","component":"server",
//          "msg":"message","task":7,"node":"n1"}
//
// One record is always one line: newlines and other control bytes in a message (a task's
// name, a peer's words) are escaped, in JSON as the standard says, in text as \n, \r, \t or
// \xNN; bytes that are not UTF-8 become U+FFFD in JSON.
//
// Repeats: a line with the same component and repeat key (Fields::repeat_key; for warnings
// and errors without one, the message itself) is written once per RepeatedLines::kWindowMs,
// and the next one written after the window says how many were held back ("(and N more like
// it before)"; in JSON also "suppressed": N).
//
// The lines go to stderr through spdlog (log.cc); core and dispatch never log (they do no
// I/O): what they decide is reported by their callers. Lives in base as its own target,
// gpusched::log, so gpusched::base stays the standard library only.
//
// Thread-safety: every function and every Logger member is safe from any thread.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"

namespace gpusched::logging {

enum class Level : int { kTrace = 0, kDebug, kInfo, kWarn, kError };
enum class Format { kText, kJson };

// "trace|debug|info|warn|error"; InvalidArgument naming `field` and the value otherwise.
StatusOr<Level> ParseLevel(std::string_view text, std::string_view field);
// "text|json"; InvalidArgument naming `field` and the value otherwise.
StatusOr<Format> ParseFormat(std::string_view text, std::string_view field);
const char* LevelName(Level level);  // "info"

// What a line concerns, beyond its component.
struct Fields {
  std::optional<uint64_t> task;
  std::string node;
  // Lines of one component with the same key are rate limited together (above); "" = the
  // message for warnings and errors, no limit for info and below.
  std::string repeat_key;
};

// One line, '\n' included. `suppressed` > 0: the repeats held back before it.
std::string FormatLine(Format format, TimeMs time_ms, Level level, std::string_view component,
                       std::string_view message, const Fields& fields, int64_t suppressed = 0);
// "2026-12-04T12:00:00.123Z" (RFC 3339, UTC, milliseconds).
std::string FormatTime(TimeMs time_ms);

// Repeat counting per key: a line is written the first time, then held back for a window,
// then written again with the number held back. At most kMaxRemembered keys (then it
// starts afresh).
class RepeatedLines {
 public:
  static constexpr int64_t kWindowMs = 60'000;
  static constexpr size_t kMaxRemembered = 256;

  explicit RepeatedLines(Clock& clock) : clock_(clock) {}
  // How many repeats were held back, to say with this line written now; -1: hold it back.
  int64_t Admit(const std::string& key);

 private:
  struct Seen {
    int64_t written_ms;
    int64_t held;
  };
  Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Seen> seen_;
};

class Logger {
 public:
  // Where finished lines go (one call per line, '\n' included).
  using Sink = std::function<void(std::string_view line)>;

  // `clock` stamps the lines (wall time) and times the repeat windows (monotonic).
  Logger(Clock& clock, Sink sink) : clock_(clock), sink_(std::move(sink)), repeats_(clock) {}

  void Configure(Level min_level, Format format);
  bool Enabled(Level level) const;
  Format format() const;
  void Log(Level level, std::string_view component, std::string_view message,
           const Fields& fields = {});

 private:
  Clock& clock_;
  Sink sink_;
  RepeatedLines repeats_;
  mutable std::mutex mu_;
  Level min_level_ = Level::kInfo;
  Format format_ = Format::kText;
};

// The process's logger: stderr through spdlog, info and text until Configure says otherwise.
Logger& Default();
inline void Configure(Level min_level, Format format) {
  Default().Configure(min_level, format);
}
inline void Log(Level level, std::string_view component, std::string_view message,
                const Fields& fields = {}) {
  Default().Log(level, component, message, fields);
}
inline void Info(std::string_view component, std::string_view message, const Fields& f = {}) {
  Log(Level::kInfo, component, message, f);
}
inline void Warn(std::string_view component, std::string_view message, const Fields& f = {}) {
  Log(Level::kWarn, component, message, f);
}
inline void Error(std::string_view component, std::string_view message, const Fields& f = {}) {
  Log(Level::kError, component, message, f);
}
// Shorthands for Fields: TaskF(7), NodeF("n1").
inline Fields TaskF(uint64_t task, std::string node = "") {
  Fields f;
  f.task = task;
  f.node = std::move(node);
  return f;
}
inline Fields NodeF(std::string node) {
  Fields f;
  f.node = std::move(node);
  return f;
}

}  // namespace gpusched::logging
