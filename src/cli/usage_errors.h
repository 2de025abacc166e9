#pragma once
// How the binary reports a mistake on its command line: the bad flag or subcommand by name,
// with a did-you-mean, and every error as JSON ({"error": ..., "code": ...}) on stderr when
// the command line has --json, so a script never has to parse prose.

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

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

}  // namespace gpusched::cli
