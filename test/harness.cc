#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace gpusched::testing {
namespace {

pid_t Spawn(const std::vector<std::string>& args, const std::string& out, const std::string& err,
            const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> full{GPUSCHED_BIN};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = err == out ? o : open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    for (const auto& [name, value] : env) {
      if (value.empty()) {
        unsetenv(name.c_str());
      } else {
        setenv(name.c_str(), value.c_str(), 1);
      }
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

}  // namespace

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(0);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

Proc::Proc(std::vector<std::string> args, std::string log_path)
    : pid_(Spawn(args, log_path, log_path)), log_path_(std::move(log_path)) {}

Proc::~Proc() { Kill(SIGKILL); }

Proc::Proc(Proc&& o) noexcept : pid_(o.pid_), log_path_(std::move(o.log_path_)) { o.pid_ = -1; }

Proc& Proc::operator=(Proc&& o) noexcept {
  Kill(SIGKILL);
  pid_ = o.pid_;
  log_path_ = std::move(o.log_path_);
  o.pid_ = -1;
  return *this;
}

void Proc::Signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

void Proc::Kill(int sig) {
  if (pid_ <= 0) return;
  kill(pid_, sig);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

int Proc::Wait() {
  if (pid_ <= 0) return -1;
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Proc::Log() const { return ReadFile(log_path_); }

CliResult Cli(const std::vector<std::string>& args) { return Cli(args, {}); }

CliResult Cli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  char out_t[] = "/tmp/gpusched_cli_out_XXXXXX";
  char err_t[] = "/tmp/gpusched_cli_err_XXXXXX";
  close(mkstemp(out_t));
  close(mkstemp(err_t));
  const pid_t pid = Spawn(args, out_t, err_t, env);
  int status = 0;
  waitpid(pid, &status, 0);
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(out_t);
  r.err = ReadFile(err_t);
  unlink(out_t);
  unlink(err_t);
  return r;
}

// The pause between polls is twice what the last check cost, at least 50 ms and at most 1 s.
// A check is usually a CLI process: 13 ms in a plain build, about 270 ms under ASan (loader
// and sanitizer start-up), where a fixed 50 ms period kept a core busy polling per test and
// starved the very servers and agents the test waits for.
bool PollUntil(const std::function<bool()>& fn, std::chrono::milliseconds timeout) {
  using std::chrono::milliseconds;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto check_start = std::chrono::steady_clock::now();
    if (fn()) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) return false;
    const auto cost = std::chrono::duration_cast<milliseconds>(now - check_start);
    std::this_thread::sleep_for(std::clamp(2 * cost, milliseconds(50), milliseconds(1000)));
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(port);
  std::string body;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    (void)!write(fd, req.data(), req.size());
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) body.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t split = body.find("\r\n\r\n");
  return split == std::string::npos ? "" : body.substr(split + 4);
}

HttpResult HttpRequest(int port, const std::string& method, const std::string& path,
                       const std::vector<std::string>& headers, const std::string& body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(port);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::string req = method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n";
    for (const std::string& h : headers) req += h + "\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    (void)!write(fd, req.data(), req.size());
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) answer.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  HttpResult r;
  if (answer.rfind("HTTP/1.", 0) == 0 && answer.size() > 12) r.status = std::atoi(answer.c_str() + 9);
  const size_t split = answer.find("\r\n\r\n");
  if (split != std::string::npos) r.body = answer.substr(split + 4);
  return r;
}

void SendGarbage(int port, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    (void)!write(fd, bytes.data(), bytes.size());
  }
  close(fd);
}

}  // namespace gpusched::testing
