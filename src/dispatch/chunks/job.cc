#include "dispatch/chunks/job.h"

#include <set>

namespace gpusched::chunks {
namespace {

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

// Kahn's algorithm; among ready stages the lowest index goes first.
StatusOr<std::vector<int>> TopologicalOrder(const JobSpec& job,
                                            const std::vector<std::set<int>>& deps) {
  const int n = static_cast<int>(job.stages.size());
  std::vector<int> missing(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int s = 0; s < n; ++s) {
    missing[s] = static_cast<int>(deps[s].size());
    for (int d : deps[s]) users[d].push_back(s);
  }
  std::set<int> ready;
  for (int s = 0; s < n; ++s) {
    if (missing[s] == 0) ready.insert(s);
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int s = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(s);
    for (int u : users[s]) {
      if (--missing[u] == 0) ready.insert(u);
    }
  }
  if (static_cast<int>(order.size()) == n) return order;
  std::string names;
  for (int s = 0; s < n; ++s) {
    if (missing[s] > 0) names += (names.empty() ? "" : ", ") + job.stages[s].name;
  }
  return InvalidArgument("stages: the dependency graph has a cycle through " + names);
}

// The names PlanJob resolves: buffers, stages and the stage that writes each output.
struct JobNames {
  std::map<std::string, const BufferSpec*> buffers;
  std::map<std::string, int> stage_index, writer;
};

Status IndexBuffers(const JobSpec& job, JobNames& names) {
  for (const BufferSpec& b : job.buffers) {
    if (b.name.empty()) return InvalidArgument("buffers: a buffer has an empty name");
    if (!names.buffers.emplace(b.name, &b).second) return InvalidArgument("buffers: duplicate name " + Quote(b.name));
    if (b.host.bytes < 0) {
      return InvalidArgument("buffers[" + b.name + "].bytes: must be >= 0, got " + std::to_string(b.host.bytes));
    }
  }
  return Status::Ok();
}

// Each stage's name, output, task count and kernel (appended to plan.kernels in stage order).
Status IndexStages(const JobSpec& job, const KernelRegistry& kernels, JobNames& names, JobPlan& plan) {
  for (int s = 0; s < static_cast<int>(job.stages.size()); ++s) {
    const StageSpec& st = job.stages[s];
    if (st.name.empty()) return InvalidArgument("stages[" + std::to_string(s) + "].name: empty");
    if (!names.stage_index.emplace(st.name, s).second) return InvalidArgument("stages: duplicate name " + Quote(st.name));
    if (st.output.empty()) return InvalidArgument("stage " + st.name + ": output: empty");
    if (!names.writer.emplace(st.output, s).second) {
      return InvalidArgument("stage " + st.name + ": output " + Quote(st.output) + " is already written by stage " +
                             job.stages[names.writer[st.output]].name);
    }
    if (st.tasks <= 0) return InvalidArgument("stage " + st.name + ": tasks: must be > 0, got " + std::to_string(st.tasks));
    StatusOr<const Kernel*> k = kernels.Find(st.kernel);
    if (!k.ok()) return Status(k.status().code(), "stage " + st.name + ": " + k.status().message());
    if (static_cast<int>(st.inputs.size()) != (*k)->inputs) {
      return InvalidArgument("stage " + st.name + ": inputs: kernel " + st.kernel + " takes " +
                             std::to_string((*k)->inputs) + ", got " + std::to_string(st.inputs.size()));
    }
    GS_RETURN_IF_ERROR(ValidateParams(**k, st.params));
    plan.kernels.push_back(*k);
  }
  return Status::Ok();
}

// BufferSpec::keep: only an input's contents are the caller's to version.
Status CheckKeptBuffers(const JobSpec& job, const JobNames& names) {
  for (const BufferSpec& b : job.buffers) {
    if (!b.keep) continue;
    const std::string field = "buffers[" + b.name + "].keep: ";
    if (!b.cache) return InvalidArgument(field + "needs cache (only cached chunks are kept)");
    if (b.host.data == nullptr) return InvalidArgument(field + "needs data (an input buffer)");
    if (auto w = names.writer.find(b.name); w != names.writer.end()) {
      return InvalidArgument(field + "stage " + job.stages[w->second].name +
                             " writes it; only inputs can be kept");
    }
  }
  return Status::Ok();
}

// Dependencies: the writers of a stage's inputs, and its `after` list.
StatusOr<std::vector<std::set<int>>> Dependencies(const JobSpec& job, const JobNames& names) {
  std::vector<std::set<int>> deps(job.stages.size());
  for (int s = 0; s < static_cast<int>(job.stages.size()); ++s) {
    const StageSpec& st = job.stages[s];
    for (const std::string& in : st.inputs) {
      if (auto w = names.writer.find(in); w != names.writer.end()) {
        deps[s].insert(w->second);
        continue;
      }
      auto b = names.buffers.find(in);
      if (b == names.buffers.end()) return InvalidArgument("stage " + st.name + ": unknown input buffer " + Quote(in));
      if (b->second->host.data == nullptr && b->second->host.bytes > 0) {
        return InvalidArgument("buffers[" + in + "].data: null for an input of " + std::to_string(b->second->host.bytes) +
                               " bytes");
      }
    }
    for (const std::string& a : st.after) {
      auto it = names.stage_index.find(a);
      if (it == names.stage_index.end()) return InvalidArgument("stage " + st.name + ": after: unknown stage " + Quote(a));
      deps[s].insert(it->second);
    }
  }
  return deps;
}

// Sizes, in execution order: a map output is as long as its input, a reduce output is the
// kernel's result size.
Status SizeBuffers(const JobSpec& job, const JobNames& names, JobPlan& plan) {
  for (const BufferSpec& b : job.buffers) {
    if (names.writer.count(b.name) == 0) plan.sizes[b.name] = b.host.bytes;
  }
  for (int s : plan.order) {
    const StageSpec& st = job.stages[s];
    const Kernel& k = *plan.kernels[s];
    const int64_t in = plan.sizes.at(st.inputs[0]);
    if (st.inputs.size() == 2 && plan.sizes.at(st.inputs[1]) != in) {
      return InvalidArgument("stage " + st.name + ": inputs " + Quote(st.inputs[0]) + " and " + Quote(st.inputs[1]) +
                             " differ in size (" + std::to_string(in) + " vs " +
                             std::to_string(plan.sizes.at(st.inputs[1])) + " bytes)");
    }
    if (in % k.element_bytes != 0) {
      return InvalidArgument("stage " + st.name + ": input " + Quote(st.inputs[0]) + " of " + std::to_string(in) +
                             " bytes is not a whole number of " + std::to_string(k.element_bytes) + "-byte elements");
    }
    const int64_t out = k.kind == KernelKind::kMap ? in : k.result_bytes(st.params);
    if (auto b = names.buffers.find(st.output); b != names.buffers.end() && b->second->host.data != nullptr &&
                                                b->second->host.bytes != out) {
      return InvalidArgument("buffers[" + st.output + "].bytes: stage " + st.name + " writes " + std::to_string(out) +
                             " bytes, got " + std::to_string(b->second->host.bytes));
    }
    plan.sizes[st.output] = out;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<JobPlan> PlanJob(const JobSpec& job, const KernelRegistry& kernels) {
  JobPlan plan;
  JobNames names;
  GS_RETURN_IF_ERROR(IndexBuffers(job, names));
  GS_RETURN_IF_ERROR(IndexStages(job, kernels, names, plan));
  GS_RETURN_IF_ERROR(CheckKeptBuffers(job, names));
  GS_ASSIGN_OR_RETURN(std::vector<std::set<int>> deps, Dependencies(job, names));
  GS_ASSIGN_OR_RETURN(plan.order, TopologicalOrder(job, deps));
  GS_RETURN_IF_ERROR(SizeBuffers(job, names, plan));
  return plan;
}

}  // namespace gpusched::chunks
