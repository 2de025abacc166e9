// The server's HTTP endpoint (/metrics, /healthz): the server's own routes
// (server/http_routes.h), backed by a real ControlPlane (in-memory store), on an
// httplib::Server that is never bound; each input is fed to it as the raw bytes of one
// connection through httplib's request parser (process_request over an in-memory Stream).
// Debian's httplib is a compiled library: its parser is exercised but not instrumented, so
// the fuzzer is guided only by the code compiled here. The same input is also checked as a
// Prometheus label value: LabelValue must escape it so that it reads back unchanged.

#include <httplib.h>

#include <cstring>
#include <memory>
#include <string>

#include "base/clock.h"
#include "fuzz/fuzz_check.h"
#include "server/control_plane.h"
#include "server/http_routes.h"
#include "server/metrics.h"
#include "store/memory_store.h"

namespace {

using namespace gpusched;

// One connection: reads come from the input, writes are kept.
class InputStream final : public httplib::Stream {
 public:
  explicit InputStream(std::string_view input) : input_(input) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, input_.size() - pos_);
    std::memcpy(ptr, input_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    written_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8080;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  const std::string& written() const { return written_; }

 private:
  std::string_view input_;
  size_t pos_ = 0;
  std::string written_;
};

class HttpEndpoint final : public httplib::Server {
 public:
  HttpEndpoint() {
    FakeClock* clock = new FakeClock(1'000'000);  // lives as long as the process
    auto cp = server::ControlPlane::Create(server::ServerConfig(), *clock,
                                           std::make_unique<store::MemoryStore>());
    FUZZ_REQUIRE(cp.ok(), cp.status().ToString());
    cp_ = std::move(*cp);
    server::RegisterHttpRoutes(*this, *cp_);
  }
  // Serves one request read from `stream`, as the listening server would on a connection.
  void Serve(httplib::Stream& stream) {
    bool closed = false;
    process_request(stream, /*close_connection=*/true, closed, nullptr);
  }

 private:
  std::unique_ptr<server::ControlPlane> cp_;
};

// Reverses LabelValue: "\\" -> "\", "\"" -> """, "\n" -> newline. False when `escaped` holds
// a raw newline, a quote without its backslash or an unknown escape.
bool Unescape(const std::string& escaped, std::string& out) {
  for (size_t i = 0; i < escaped.size(); ++i) {
    const char c = escaped[i];
    if (c == '\n' || c == '"') return false;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i == escaped.size()) return false;
    if (escaped[i] == 'n') out += '\n';
    else if (escaped[i] == '\\' || escaped[i] == '"') out += escaped[i];
    else return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static HttpEndpoint* const endpoint = new HttpEndpoint();  // one for the process
  const std::string_view input = fuzz::Text(data, size);
  InputStream stream(input);
  endpoint->Serve(stream);
  const std::string& out = stream.written();
  FUZZ_REQUIRE(out.empty() || out.starts_with("HTTP/1.1 "), out.substr(0, 80));

  const std::string value(input);
  std::string back;
  FUZZ_REQUIRE(Unescape(server::LabelValue(value), back) && back == value,
               "LabelValue does not escape its input reversibly");
  return 0;
}
