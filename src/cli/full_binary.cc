#include "cli/full_binary.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "cli/usage_errors.h"

namespace gpusched::cli {
namespace {

// Whether argv[i] is one of the global options before the command (--ca FILE, --server ADDR,
// or their --opt=value form, --insecure); `i` then moves past its value.
bool SkipGlobalOption(int argc, char** argv, int& i) {
  const std::string_view a = argv[i];
  if (a == "--insecure") return true;
  if (a == "--ca" || a == "--server") {
    i = std::min(i + 1, argc - 1);
    return true;
  }
  return a.starts_with("--ca=") || a.starts_with("--server=");
}

}  // namespace

bool HandledByClientBinary(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (SkipGlobalOption(argc, argv, i)) continue;
    const std::string_view a = argv[i];
    if (a == "--version") return true;
    if (a.empty() || a[0] == '-') return false;  // --help, or a mistake the whole binary names
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->check_name(std::string(a))) return true;
    }
    return false;
  }
  return false;  // no command: the whole binary prints what there is
}

std::vector<char*> WithJsonAfterTheCommand(int argc, char** argv) {
  std::vector<char*> out(argv, argv + argc);
  int json = -1, command = -1;
  for (int i = 1; i < argc; ++i) {
    if (SkipGlobalOption(argc, argv, i)) continue;
    const std::string_view a = argv[i];
    if (a == "--json") {
      json = i;
      continue;
    }
    if (!a.empty() && a[0] != '-') command = i;
    break;
  }
  if (json > 0 && command > json) {
    int end = command;  // past the command's words: "quota ls", "show 5"
    while (end < argc && argv[end][0] != '-') ++end;
    out.insert(out.begin() + end, argv[json]);
    out.erase(out.begin() + json);
  }
  out.push_back(nullptr);
  return out;
}

int ExecFullBinary(char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path full =
      (ec ? std::filesystem::path(argv[0]) : self).parent_path() / kFullBinaryName;
  execv(full.c_str(), argv);
  const int err = errno;
  PrintError("cannot run " + full.string() + ": " + std::strerror(err) +
                 " (gpusched-full is installed next to gpusched and runs every command other "
                 "than the client ones)",
             kExitFailure);
  return kExitFailure;
}

}  // namespace gpusched::cli
