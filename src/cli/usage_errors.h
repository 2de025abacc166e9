#pragma once
// How the binary reports a mistake on its command line: the bad flag or subcommand by name,
// with a did-you-mean, and every error as JSON ({"error": ..., "code": ...}) on stderr when
// the command line has --json, so a script never has to parse prose.

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "base/status.h"

namespace gpusched::cli {

// The candidate closest to `word` (edit distance <= 2, or `word` a prefix of it), "" if none.
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates);

// A message naming what is wrong in argv, for a parse error CLI11 reported as `e`:
// an unknown subcommand or flag (with a did-you-mean), else CLI11's own message.
std::string DescribeParseError(CLI::App& app, const std::vector<std::string>& args,
                               const CLI::ParseError& e);

// Set once by main, from the command line, before any command runs.
void SetJsonErrors(bool on);
// Prints "gpusched: <message>" (or the JSON object) to stderr.
void PrintError(const std::string& message, int exit_code);

// The one way a command ends on an error (every subcommand, so that --json holds for all):
// Ends the command with `code` (main returns it).
[[noreturn]] void ExitWith(int code);
// PrintError(message, exit_code), then ExitWith(exit_code).
[[noreturn]] void Fail(const std::string& message, int exit_code);
// The exit code for `status` (commands.h): 2 bad input, 3 unreachable, 4 denied, 1 else.
int ExitCodeFor(const Status& status);
// Fail(status.message(), ExitCodeFor(status)).
[[noreturn]] void Fail(const Status& status);
// The value, or Fail(its status) (with `exit_code` when given).
template <typename T>
T OrFail(StatusOr<T> v) {
  if (!v.ok()) Fail(v.status());
  return std::move(v).value();
}
template <typename T>
T OrFail(StatusOr<T> v, int exit_code) {
  if (!v.ok()) Fail(v.status().message(), exit_code);
  return std::move(v).value();
}

}  // namespace gpusched::cli
