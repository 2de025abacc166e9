#include "cli/usage_errors.h"

#include <nlohmann/json.hpp>

#include "cli/commands.h"

#include <algorithm>
#include <cctype>
#include <iostream>

namespace gpusched::cli {
namespace {

bool json_errors = false;

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> SubcommandNames(CLI::App& app) {
  std::vector<std::string> names;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

std::vector<std::string> FlagNames(CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

std::string WithHint(std::string message, const std::string& guess) {
  if (!guess.empty()) message += "; did you mean " + guess + "?";
  return message;
}

}  // namespace

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = 3;
  for (const std::string& c : candidates) {
    const size_t d = c.rfind(word, 0) == 0 && word.size() > 2 ? 1 : EditDistance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string DescribeParseError(CLI::App& app, const std::vector<std::string>& args,
                               const CLI::ParseError& e) {
  // The chain of subcommands named on the command line: gpusched [bench] SUB ...
  CLI::App* leaf = &app;
  std::string path;      // "submit", "bench core"
  size_t leaf_args = 0;  // where the leaf's own flags and arguments start
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.empty() || a[0] == '-') continue;
    if (!leaf->get_subcommands([](CLI::App*) { return true; }).empty()) {
      CLI::App* sub = nullptr;
      try {
        sub = leaf->get_subcommand(a);
      } catch (const CLI::OptionNotFound&) {  // not one of leaf's subcommands
      }
      if (sub == nullptr) {
        return WithHint((path.empty() ? "" : path + ": ") + "unknown command \"" + a + "\"",
                        DidYouMean(a, SubcommandNames(*leaf))) +
               " (see gpusched " + (path.empty() ? "" : path + " ") + "--help)";
      }
      leaf = sub;
      path += (path.empty() ? "" : " ") + a;
      leaf_args = i + 1;
      continue;
    }
    break;  // leaf has no subcommands: the rest are its flags and arguments
  }
  if (leaf != &app) {
    const std::vector<std::string> known = FlagNames(*leaf);
    for (size_t i = leaf_args; i < args.size() && args[i] != "--"; ++i) {
      const std::string& a = args[i];
      if (a.size() < 2 || a[0] != '-' || std::isdigit(static_cast<unsigned char>(a[1]))) continue;
      const std::string name = a.substr(0, a.find('='));
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      return WithHint(path + ": unknown flag " + name, DidYouMean(name, known)) +
             " (see gpusched " + path + " --help)";
    }
  }
  return (path.empty() ? "" : path + ": ") + e.what();
}

void SetJsonErrors(bool on) { json_errors = on; }

void PrintError(const std::string& message, int exit_code) {
  if (json_errors) {
    const nlohmann::json j = {{"error", message}, {"code", exit_code}};
    std::cerr << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cerr << "gpusched: " << message << "\n";
  }
}

void ExitWith(int code) { throw CLI::RuntimeError(code); }

void Fail(const std::string& message, int exit_code) {
  PrintError(message, exit_code);
  ExitWith(exit_code);
}

int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kResourceExhausted: return kExitUsage;
    case StatusCode::kUnavailable: return kExitUnavailable;
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied: return kExitDenied;
    default: return kExitFailure;
  }
}

void Fail(const Status& s) { Fail(s.message(), ExitCodeFor(s)); }

}  // namespace gpusched::cli
