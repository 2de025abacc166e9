#pragma once
// Test harness for the integration tests: free loopback ports, the real `gpusched` binary as
// child processes (server, agents) and as a CLI, and polling with deadlines.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace gpusched::testing {

// Whether `text` (a command's output, a log) contains `part`.
inline bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

int FreePort();

// A background `gpusched` process (server or agent) with output in `log_path`.
class Proc {
 public:
  Proc() = default;
  Proc(std::vector<std::string> args, std::string log_path);
  ~Proc();
  Proc(Proc&& o) noexcept;
  Proc& operator=(Proc&& o) noexcept;
  void Kill(int sig);  // signal, then wait for the exit
  void Signal(int sig);  // signal only (SIGSTOP, SIGCONT)
  // Waits for the process to end by itself: its exit code (128 + the signal that killed it).
  int Wait();
  bool alive() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

struct CliResult {
  int code = -1;
  std::string out, err;
};
CliResult Cli(const std::vector<std::string>& args);
// The same with environment variables changed for this run only ("" = unset).
CliResult Cli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env);

// Calls `fn` until it returns true or `timeout` passes, pausing twice what the last call cost
// (50 ms to 1 s) between calls.
bool PollUntil(const std::function<bool()>& fn, std::chrono::milliseconds timeout);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);
// GET http://127.0.0.1:port/path; the body, or "" on error.
std::string HttpGet(int port, const std::string& path);
struct HttpResult {
  int status = 0;  // 0: no answer
  std::string body;
};
// One HTTP/1.0 request to 127.0.0.1:port; `headers` as "Name: value".
HttpResult HttpRequest(int port, const std::string& method, const std::string& path,
                       const std::vector<std::string>& headers = {},
                       const std::string& body = "");
// Writes raw bytes to 127.0.0.1:port and closes.
void SendGarbage(int port, const std::string& bytes);

}  // namespace gpusched::testing
