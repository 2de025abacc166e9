#pragma once
// Which tasks a command names (issue 41): ids, id ranges, job arrays and filters, for `ls`,
// `show`, `cancel` and `wait`.
//
//   12        task 12
//   12-20     tasks 12 to 20 (those that exist)
//   12.*      every task of the job array whose id is 12 (its first task's id, what
//             `submit --array` prints)
//   12.3      the task of array 12 with index 3
//   --name N  tasks named N, and an array's tasks named N[i]
//   --user U, --team T, --node NODE (its current or latest node), --state S
//
// Ids and filters together: the named tasks that pass every filter.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cli/client.h"

namespace gpusched::cli {

// The task's `--state` filters plus issue 41's; "" = any.
struct TaskFilter {
  std::vector<std::string> states;
  std::string user;
  std::string team;
  std::string name;
  std::string node;
  bool Empty() const {
    return states.empty() && user.empty() && team.empty() && name.empty() && node.empty();
  }
};

// Adds --name, --user, --node (and --team when `team`) to `cmd`, described for `verb`
// ("list", "cancel", "wait for").
void AddFilterFlags(CLI::App* cmd, TaskFilter& filter, const std::string& verb, bool team);

// Every task in any of `states` (none = every task) that passes `filter`'s other fields, over
// every page, in id order, each once.
std::vector<v1::Task> ListTasks(Client& c, const std::set<std::string>& states,
                                const TaskFilter& filter = {});
// Every task with an id in [first, last], in any state, in id order: the pages of that range
// only (a job array's tasks are consecutive).
std::vector<v1::Task> ListIdRange(Client& c, uint64_t first, uint64_t last);
// ListTasks after checking each of `filter.states` (a typo is a usage error naming --state).
std::vector<v1::Task> ListFiltered(Client& c, const TaskFilter& filter);

// One task id: a number >= 1, else a usage error naming `field` and the text.
uint64_t ParseTaskId(const std::string& text, const std::string& field = "id");

// The ids `specs` name (the forms above), in id order, each once; with a filter, only those
// that pass it. Usage errors name the text; an array id that is no array's fails naming it.
std::vector<uint64_t> SelectTaskIds(Client& c, const std::vector<std::string>& specs,
                                    const TaskFilter& filter);

v1::Task GetTask(Client& c, uint64_t id);

}  // namespace gpusched::cli
