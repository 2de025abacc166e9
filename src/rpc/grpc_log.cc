#include "rpc/grpc_log.h"

#include <grpc/support/log.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>


namespace gpusched::rpc {
namespace {

constexpr size_t kMaxSummary = 512;
constexpr int kMaxDepth = 16;

thread_local GrpcLogCapture* t_capture = nullptr;

// absl's status code names, as gRPC writes them in front of a status's message.
constexpr std::array<std::string_view, 17> kCodeNames = {
    "OK",           "CANCELLED",        "UNKNOWN",           "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED", "NOT_FOUND",   "ALREADY_EXISTS",    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",  "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL",        "UNAVAILABLE",       "DATA_LOSS",
    "UNAUTHENTICATED"};

bool IsKeyChar(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return std::islower(u) || std::isdigit(u) || c == '_';
}

// Whether `s` at `i` starts an attribute block: " {" then a key and ':'.
bool AttributesAt(std::string_view s, size_t i) {
  if (s.compare(i, 2, " {") != 0) return false;
  size_t j = i + 2;
  while (j < s.size() && IsKeyChar(s[j])) ++j;
  return j > i + 2 && j < s.size() && s[j] == ':';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// "UNKNOWN:text" -> "text"; "UNKNOWN" alone -> "".
std::string_view WithoutCode(std::string_view head) {
  for (std::string_view code : kCodeNames) {
    if (head == code) return {};
    if (head.size() > code.size() && head.starts_with(code) && head[code.size()] == ':') {
      return head.substr(code.size() + 1);
    }
  }
  return head;
}

// A recursive-descent reader of gRPC's status text (StatusToString):
//   node     := head [" {" attr (", " attr)* "}"]
//   head     := [CODE ":"] text
//   attr     := key ":" ( '"' escaped '"' | "[" node (", " node)* "]" | bare )
// It collects each node's text, outermost first. Any surprise ends the parse (false).
class StatusTreeReader {
 public:
  explicit StatusTreeReader(std::string_view s) : s_(s) {}

  bool Read(std::vector<std::string_view>& texts) {
    if (!Node(0, texts)) return false;
    return pos_ == s_.size();
  }

 private:
  bool Node(int depth, std::vector<std::string_view>& texts) {
    if (depth >= kMaxDepth) return false;
    const size_t start = pos_;
    // A nested node's head also ends where its list goes on or closes.
    while (pos_ < s_.size() && !AttributesAt(s_, pos_) &&
           !(depth > 0 && (s_[pos_] == ']' || s_.compare(pos_, 2, ", ") == 0))) {
      ++pos_;
    }
    texts.push_back(Trim(WithoutCode(s_.substr(start, pos_ - start))));
    if (pos_ == s_.size() || !AttributesAt(s_, pos_)) return true;
    pos_ += 2;  // " {"
    for (;;) {
      if (!Attribute(depth, texts)) return false;
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      if (s_.compare(pos_, 2, ", ") != 0) return false;
      pos_ += 2;
    }
  }

  bool Attribute(int depth, std::vector<std::string_view>& texts) {
    const size_t key_start = pos_;
    while (pos_ < s_.size() && IsKeyChar(s_[pos_])) ++pos_;
    if (pos_ == key_start || pos_ >= s_.size() || s_[pos_] != ':') return false;
    const std::string_view key = s_.substr(key_start, pos_ - key_start);
    ++pos_;
    if (pos_ >= s_.size()) return false;
    if (s_[pos_] == '"') return Quoted();
    if (key == "children" && s_[pos_] == '[') {
      ++pos_;
      for (;;) {
        if (!Node(depth + 1, texts)) return false;
        if (pos_ < s_.size() && s_[pos_] == ']') {
          ++pos_;
          return true;
        }
        if (s_.compare(pos_, 2, ", ") != 0) return false;
        pos_ += 2;
      }
    }
    const size_t value_start = pos_;
    while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != '}') ++pos_;
    return pos_ > value_start;
  }

  bool Quoted() {
    ++pos_;  // the opening quote
    while (pos_ < s_.size()) {
      if (s_[pos_] == '\\') {
        pos_ += 2;
      } else if (s_[pos_] == '"') {
        ++pos_;
        return pos_ <= s_.size();
      } else {
        ++pos_;
      }
    }
    return false;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// Cut at kMaxSummary bytes, never inside a UTF-8 sequence.
std::string Bounded(std::string s) {
  if (s.size() <= kMaxSummary) return s;
  size_t cut = kMaxSummary - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  s.resize(cut);
  return s + "...";
}

const char* SeverityName(gpr_log_severity severity) {
  switch (severity) {
    case GPR_LOG_SEVERITY_DEBUG:
      return "debug";
    case GPR_LOG_SEVERITY_INFO:
      return "info";
    case GPR_LOG_SEVERITY_ERROR:
      return "error";
  }
  return "log";
}

logging::Level LevelOf(gpr_log_severity severity) {
  switch (severity) {
    case GPR_LOG_SEVERITY_DEBUG:
      return logging::Level::kDebug;
    case GPR_LOG_SEVERITY_INFO:
      return logging::Level::kInfo;
    case GPR_LOG_SEVERITY_ERROR:
      return logging::Level::kError;
  }
  return logging::Level::kError;
}

// Through the daemons' logger: its repeat counting holds back the same line from the same
// place in gRPC for a minute.
void Write(logging::Level level, const std::string& summary, const std::string& where) {
  logging::Fields fields;
  fields.repeat_key = where + "\n" + summary;
  logging::Log(level, "grpc", "gRPC: " + summary + " (" + where + ")", fields);
}

std::atomic<GrpcLogMode> g_mode{GrpcLogMode::kDaemon};

void Sink(gpr_log_func_args* args) {
  std::string summary = SummarizeGrpcMessage(args->message != nullptr ? args->message : "");
  const char* file = args->file != nullptr ? args->file : "?";
  if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
  std::string where = std::string(SeverityName(args->severity)) + " at " + file + ":" +
                      std::to_string(args->line);
  if (t_capture != nullptr) {
    t_capture->Add(std::move(summary), std::move(where));
    return;
  }
  // A client still says why gRPC is about to abort the process (GPR_ASSERT logs, then aborts).
  if (g_mode.load() == GrpcLogMode::kClient && !summary.starts_with("assertion failed")) return;
  Write(LevelOf(args->severity), summary, where);
}

}  // namespace

void InstallGrpcLogSink(GrpcLogMode mode) {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  g_mode.store(mode);
  gpr_set_log_function(&Sink);
}

std::string SummarizeGrpcMessage(std::string_view message) {
  const std::string_view first = message.substr(0, message.find('\n'));  // one line
  std::vector<std::string_view> texts;
  StatusTreeReader reader(first);
  if (!reader.Read(texts)) return Bounded(std::string(Trim(first)));
  std::string out;
  std::vector<std::string_view> seen;
  for (std::string_view t : texts) {
    if (t.empty() || std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
    seen.push_back(t);
    if (!out.empty()) out += ": ";
    out += t;
  }
  return Bounded(std::move(out));
}

GrpcLogCapture::GrpcLogCapture() : outer_(t_capture) { t_capture = this; }

GrpcLogCapture::~GrpcLogCapture() { t_capture = outer_; }

std::vector<std::string> GrpcLogCapture::lines() const {
  std::vector<std::string> out;
  out.reserve(lines_.size());
  for (const Line& l : lines_) out.push_back(l.summary);
  return out;
}

void GrpcLogCapture::Add(std::string summary, std::string where) {
  lines_.push_back({std::move(summary), std::move(where)});
}

void GrpcLogCapture::Replay() {
  for (const Line& l : lines_) Write(logging::Level::kError, l.summary, l.where);
  lines_.clear();
}

std::string ListenFailureReason(const GrpcLogCapture& capture) {
  for (auto it = capture.lines_.rbegin(); it != capture.lines_.rend(); ++it) {
    const std::string& l = it->summary;
    const size_t colon = l.rfind(": ");
    std::string cause = colon == std::string::npos ? l : l.substr(colon + 2);
    if (cause.empty() || cause.starts_with("No address added")) continue;
    // "Address already in use" -> "address already in use"; "TLS ..." stays.
    if (cause.size() > 1 && std::isupper(static_cast<unsigned char>(cause[0])) &&
        std::islower(static_cast<unsigned char>(cause[1]))) {
      cause[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(cause[0])));
    }
    return cause;
  }
  return "address already in use";
}

}  // namespace gpusched::rpc
