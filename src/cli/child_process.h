#pragma once
// The process helpers the CLI's benchmarks use (base/subprocess.h), and a bare HTTP GET on
// loopback for reading a child server's /metrics.

#include <string>

#include "base/subprocess.h"

namespace gpusched::cli {

using gpusched::ChildProcess;
using gpusched::FreeLoopbackPort;
using gpusched::ResidentKib;

// GET http://127.0.0.1:port/path; the body, or "" on any error.
std::string HttpGetLoopback(int port, const std::string& path);

}  // namespace gpusched::cli
