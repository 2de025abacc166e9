#include "core/stop_signal.h"

#include <algorithm>
#include <array>
#include <span>
#include <cctype>
#include <utility>

namespace gpusched::core {
namespace {

constexpr int kRtMin = 34, kRtMax = 64;

constexpr std::array<std::pair<std::string_view, int>, 27> kNames = {{
    {"HUP", 1},   {"INT", 2},     {"QUIT", 3},  {"ILL", 4},    {"TRAP", 5},   {"ABRT", 6},
    {"BUS", 7},   {"FPE", 8},     {"KILL", 9},  {"USR1", 10},  {"SEGV", 11},  {"USR2", 12},
    {"PIPE", 13}, {"ALRM", 14},   {"TERM", 15}, {"STKFLT", 16}, {"CHLD", 17}, {"CONT", 18},
    {"STOP", 19}, {"TSTP", 20},   {"TTIN", 21}, {"TTOU", 22},  {"URG", 23},   {"XCPU", 24},
    {"XFSZ", 25}, {"VTALRM", 26}, {"PROF", 27},
}};
constexpr std::array<std::pair<std::string_view, int>, 4> kMoreNames = {{
    {"WINCH", 28}, {"IO", 29}, {"PWR", 30}, {"SYS", 31},
}};

std::string Upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

}  // namespace

Status CheckStopSignal(int sig, const std::string& field) {
  const bool blocked = sig == 9 || (sig >= 17 && sig <= 22);
  if (sig >= 1 && sig <= 31 && !blocked) return Status::Ok();
  if (sig >= kRtMin && sig <= kRtMax) return Status::Ok();
  std::string why = "not a signal a task can be stopped with (use a catchable signal such as "
                    "TERM, INT, USR1, USR2 or 34-64)";
  if (sig == 9) why = "SIGKILL cannot be caught: the task could not checkpoint (omit it: "
                      "SIGKILL follows the grace anyway)";
  if (sig >= 19 && sig <= 22) why = StopSignalName(sig) + " would freeze the task, not stop it";
  if (sig == 17 || sig == 18) why = StopSignalName(sig) + " does not stop a task";
  return InvalidArgument(field + ": " + std::to_string(sig) + ": " + why);
}

StatusOr<int> ParseStopSignal(std::string_view text, const std::string& field) {
  if (!text.empty() && text.size() <= 3 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const int sig = std::stoi(std::string(text));
    GS_RETURN_IF_ERROR(CheckStopSignal(sig, field));
    return sig;
  }
  std::string name = Upper(text);
  if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
  for (const auto& table : {std::span<const std::pair<std::string_view, int>>(kNames),
                            std::span<const std::pair<std::string_view, int>>(kMoreNames)}) {
    for (const auto& [n, sig] : table) {
      if (name == n) {
        GS_RETURN_IF_ERROR(CheckStopSignal(sig, field));
        return sig;
      }
    }
  }
  return InvalidArgument(field + ": \"" + std::string(text) +
                         "\" is not a signal (use a name such as TERM, USR1, SIGINT, or a "
                         "number)");
}

std::string StopSignalName(int sig) {
  for (const auto& [n, s] : kNames) {
    if (s == sig) return "SIG" + std::string(n);
  }
  for (const auto& [n, s] : kMoreNames) {
    if (s == sig) return "SIG" + std::string(n);
  }
  if (sig >= kRtMin && sig <= kRtMax) return "SIGRTMIN+" + std::to_string(sig - kRtMin);
  return std::to_string(sig);
}

}  // namespace gpusched::core
