#include "cli/task_selection.h"

#include <algorithm>

#include "base/task_id_spec.h"
#include "rpc/convert.h"

namespace gpusched::cli {
namespace {

// The tasks of every page from after `after_id` up to `last_id`, each once, in id order.
std::vector<v1::Task> ListPages(Client& c, const std::set<std::string>& states,
                                const TaskFilter& filter, uint64_t after_id, uint64_t last_id) {
  std::vector<v1::Task> out;
  for (uint64_t after = after_id;;) {
    v1::ListTasksRequest req;
    for (const std::string& st : states) req.add_states(st);
    // One state in `state` too: a server older than `states` then lists only it.
    if (states.size() == 1) req.set_state(*states.begin());
    req.set_user(filter.user);
    req.set_team(filter.team);
    req.set_name(filter.name);
    req.set_node(filter.node);
    req.set_after_id(after);
    v1::ListTasksResponse page;
    Status s =
        c.Call([&](grpc::ClientContext& ctx) { return c.stub().ListTasks(&ctx, req, &page); });
    if (!s.ok()) Fail(s);
    for (v1::Task& t : *page.mutable_tasks()) {
      if (t.id() > last_id) return out;
      // A server older than `states` answers every task: the filter is also applied here.
      if (states.empty() || states.count(t.state()) > 0) out.push_back(std::move(t));
    }
    if (page.next_after_id() == 0 || page.next_after_id() >= last_id) return out;
    after = page.next_after_id();
  }
}

std::set<std::string> CheckedStates(const std::vector<std::string>& states) {
  std::set<std::string> names;
  for (const std::string& st : states) {
    names.insert(core::TaskStateName(OrFail(rpc::TaskStateFromName(st, "--state"))));
  }
  return names;
}

// The ids of job array `array_id` ("12" of "12.*"), or of its index `index` ("12.3").
std::vector<uint64_t> ArrayIds(Client& c, const std::string& spec, uint64_t array_id,
                               std::optional<int64_t> index) {
  const v1::Task first = GetTask(c, array_id);
  if (!first.has_array() || first.array().id() != array_id) {
    const std::string hint = first.has_array() ? " (task " + std::to_string(array_id) +
                                                     " belongs to array " +
                                                     std::to_string(first.array().id()) + ")"
                                               : "";
    Fail(InvalidArgument("id: \"" + spec + "\": task " + std::to_string(array_id) +
                         " is not a job array's first task" + hint));
  }
  const v1::ArrayMembership& a = first.array();
  if (index) {
    if (*index < a.first() || *index > a.last()) {
      Fail(InvalidArgument("id: \"" + spec + "\": array " + std::to_string(array_id) +
                           " has indices " + std::to_string(a.first()) + "-" +
                           std::to_string(a.last())));
    }
    return {array_id + static_cast<uint64_t>(*index - a.first())};
  }
  std::vector<uint64_t> ids;
  for (int64_t i = a.first(); i <= a.last(); ++i) {
    ids.push_back(array_id + static_cast<uint64_t>(i - a.first()));
  }
  return ids;
}

// The ids one spec names (the forms in base/task_id_spec.h).
std::vector<uint64_t> IdsOf(Client& c, const std::string& text) {
  const TaskIdSpec spec = OrFail(ParseTaskIdSpec(text, "id"));
  switch (spec.kind) {
    case TaskIdSpec::Kind::kId:
      return {spec.first};
    case TaskIdSpec::Kind::kArray:
      return ArrayIds(c, text, spec.first, std::nullopt);
    case TaskIdSpec::Kind::kArrayIndex:
      return ArrayIds(c, text, spec.first, spec.index);
    case TaskIdSpec::Kind::kRange:
      break;
  }
  std::vector<uint64_t> ids;  // the tasks that exist in the range, however wide
  for (const v1::Task& t : ListIdRange(c, spec.first, spec.last)) ids.push_back(t.id());
  if (ids.empty()) Fail(NotFound("id: \"" + text + "\": no task in that range"));
  return ids;
}

}  // namespace

void AddFilterFlags(CLI::App* cmd, TaskFilter& filter, const std::string& verb, bool team) {
  cmd->add_option("--name", filter.name,
                  "Only " + verb + " tasks of this name (an array's NAME[i] too)");
  cmd->add_option("--user", filter.user, "Only " + verb + " this user's tasks");
  if (team) cmd->add_option("--team", filter.team, "Only " + verb + " this team's tasks");
  cmd->add_option("--node", filter.node,
                  "Only " + verb + " tasks running, or last run, on this node");
}

std::vector<v1::Task> ListTasks(Client& c, const std::set<std::string>& states,
                                const TaskFilter& filter) {
  return ListPages(c, states, filter, 0, UINT64_MAX);
}

std::vector<v1::Task> ListIdRange(Client& c, uint64_t first, uint64_t last) {
  return ListPages(c, {}, {}, first - 1, last);
}

std::vector<v1::Task> ListFiltered(Client& c, const TaskFilter& filter) {
  return ListTasks(c, CheckedStates(filter.states), filter);
}

uint64_t ParseTaskId(const std::string& text, const std::string& field) {
  const TaskIdSpec spec = OrFail(ParseTaskIdSpec(text, field));
  if (spec.kind != TaskIdSpec::Kind::kId) {
    Fail(InvalidArgument(field + ": \"" + text + "\" names several tasks; this command takes "
                         "one task id"));
  }
  return spec.first;
}

std::vector<uint64_t> SelectTaskIds(Client& c, const std::vector<std::string>& specs,
                                    const TaskFilter& filter) {
  std::set<uint64_t> named;
  for (const std::string& spec : specs) {
    for (uint64_t id : IdsOf(c, spec)) named.insert(id);
  }
  if (filter.Empty()) return {named.begin(), named.end()};
  std::vector<uint64_t> out;
  for (const v1::Task& t : ListFiltered(c, filter)) {
    if (specs.empty() || named.count(t.id()) > 0) out.push_back(t.id());
  }
  return out;
}

v1::Task GetTask(Client& c, uint64_t id) {
  v1::GetTaskRequest req;
  req.set_id(id);
  v1::Task t;
  Status s = c.Call([&](grpc::ClientContext& ctx) { return c.stub().GetTask(&ctx, req, &t); });
  if (!s.ok()) Fail(s);
  return t;
}

}  // namespace gpusched::cli
