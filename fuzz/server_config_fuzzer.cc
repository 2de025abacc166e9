// The server's YAML configuration (`gpusched server --config FILE`, server::ApplyConfigFile).
// ApplyConfigFile reads a path, so each input is written to one temporary file first. A file
// either yields a configuration that validates or an InvalidArgument naming the file.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "fuzz/fuzz_check.h"
#include "server/server_config.h"

namespace {

// One file per process, removed at exit. Never destroyed, so the atexit hook can read it.
const std::string& ConfigPath() {
  static const std::string* const path = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* p = new std::string(std::string(tmp && *tmp ? tmp : "/tmp") +
                              "/gpusched-fuzz-config-XXXXXX");
    const int fd = mkstemp(p->data());
    FUZZ_REQUIRE(fd >= 0, "mkstemp " + *p);
    close(fd);
    std::atexit([] { std::remove(ConfigPath().c_str()); });
    return p;
  }();
  return *path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  const std::string& path = ConfigPath();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  server::ServerConfig config;
  const Status s = server::ApplyConfigFile(path, config);
  if (!s.ok()) {
    FUZZ_REQUIRE(s.code() == StatusCode::kInvalidArgument, s.ToString());
    const bool names_file = s.message().starts_with("config " + path);
    const bool names_option = s.message().find(": ") != std::string::npos;
    FUZZ_REQUIRE(names_file || names_option, s.ToString());
    return 0;
  }
  const Status valid = config.Validate();
  FUZZ_REQUIRE(valid.ok(), valid.ToString());
  return 0;
}
