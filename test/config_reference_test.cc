// Issue 39, configuration reference: docs/server-config.md and docs/agent-config.md list
// exactly the keys the parsers know (server/server_config.h ServerConfigKeys, agent/
// agent_config.h AgentConfigKeys), and every default they give as a value (`5s`) is the one
// the code has. A key added to a parser without its line in the reference fails here, and so
// does a line for a key the code no longer knows, and a default changed on one side only.

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/agent_config.h"
#include "server/server_config.h"

namespace gpusched {
namespace {

// One key's line of a reference table: | `key` | type | default | unit | what | claim |
struct Row {
  std::string default_cell;
  int line = 0;
};

std::string Trim(std::string s) {
  s.erase(0, s.find_first_not_of(' '));
  s.erase(s.find_last_not_of(' ') + 1);
  return s;
}

// The rows of every table whose first cell is a key in backticks; a key twice fails.
std::map<std::string, Row> ReadReference(const std::string& name) {
  const std::string path = std::string(GPUSCHED_SOURCE_DIR) + "/docs/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::map<std::string, Row> rows;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream parts(line.substr(1));
    for (std::string cell; std::getline(parts, cell, '|');) cells.push_back(Trim(cell));
    EXPECT_GE(cells.size(), 6u) << name << ":" << n << ": key, type, default, unit, what, claim";
    if (cells.size() < 3) continue;
    const std::string key = cells[0].substr(1, cells[0].find('`', 1) - 1);
    auto [it, fresh] = rows.try_emplace(key, Row{cells[2], n});
    EXPECT_TRUE(fresh) << name << ":" << n << ": " << key << " is listed twice (line "
                       << it->second.line << ")";
  }
  return rows;
}

// The value a default cell gives (`5s` -> 5s, `""` -> empty), or nullopt for prose.
std::optional<std::string> DocumentedValue(const std::string& cell) {
  if (cell.size() < 2 || cell[0] != '`') return std::nullopt;
  const std::string v = cell.substr(1, cell.find('`', 1) - 1);
  return v == "\"\"" ? "" : v;
}

void ExpectSameKeys(const std::map<std::string, Row>& doc, const std::vector<std::string>& code,
                    const std::string& name) {
  const std::set<std::string> in_code(code.begin(), code.end());
  for (const std::string& key : in_code) {
    EXPECT_TRUE(doc.count(key)) << "the code knows \"" << key << "\" but docs/" << name
                                << " does not list it: add its row";
  }
  for (const auto& [key, row] : doc) {
    EXPECT_TRUE(in_code.count(key)) << "docs/" << name << ":" << row.line << " lists \"" << key
                                    << "\", which the code does not know";
  }
}

template <typename IsDefault>
void ExpectDefaults(const std::map<std::string, Row>& doc, const std::set<std::string>& prose,
                    const std::string& name, IsDefault is_default) {
  int checked = 0;
  for (const auto& [key, row] : doc) {
    const std::optional<std::string> value = DocumentedValue(row.default_cell);
    if (!value) {
      EXPECT_TRUE(prose.count(key)) << "docs/" << name << ":" << row.line << ": the default of "
                                    << key << " is not a value in backticks: write it as one "
                                    << "(it is then checked against the code)";
      continue;
    }
    StatusOr<bool> same = is_default(key, *value);
    if (!same.ok() && same.status().code() == StatusCode::kNotFound) continue;  // a mapping
    ASSERT_TRUE(same.ok()) << "docs/" << name << ":" << row.line << ": " << key << ": "
                           << same.status().ToString();
    EXPECT_TRUE(*same) << "docs/" << name << ":" << row.line << ": " << key << " defaults to `"
                       << *value << "` in the reference, not in the code";
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(ConfigReferenceTest, Issue39_ServerReferenceListsEveryKeyWithTheCodesDefault) {
  const auto doc = ReadReference("server-config.md");
  ExpectSameKeys(doc, server::ServerConfigKeys(), "server-config.md");
  // Defaults that depend on something else, said in words.
  const std::set<std::string> prose = {"auth", "max_priority_value", "memory_table"};
  ExpectDefaults(doc, prose, "server-config.md", server::IsServerConfigDefault);
}

TEST(ConfigReferenceTest, Issue39_AgentReferenceListsEveryKeyWithTheCodesDefault) {
  const auto doc = ReadReference("agent-config.md");
  ExpectSameKeys(doc, agent::AgentConfigKeys(), "agent-config.md");
  const std::set<std::string> prose = {"server", "name", "data_dir"};
  ExpectDefaults(doc, prose, "agent-config.md", agent::IsAgentConfigDefault);
}

// The comparison itself: a documented default that is not the code's is caught.
TEST(ConfigReferenceTest, Issue39_AWrongDefaultIsCaught) {
  EXPECT_TRUE(*server::IsServerConfigDefault("t2", "30s"));
  EXPECT_FALSE(*server::IsServerConfigDefault("t2", "31s"));
  EXPECT_TRUE(*server::IsServerConfigDefault("capacity_wait", "failure_queue"));
  EXPECT_FALSE(*server::IsServerConfigDefault("capacity_wait", "stay_queued"));
  EXPECT_TRUE(*server::IsServerConfigDefault("http_max_body", "1MiB"));
  EXPECT_EQ(server::IsServerConfigDefault("score_weights", "{}").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(server::IsServerConfigDefault("t2", "soon").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(*agent::IsAgentConfigDefault("gpus", "8x80GiB"));
  EXPECT_FALSE(*agent::IsAgentConfigDefault("gpus", "1x16GiB"));
}

}  // namespace
}  // namespace gpusched
