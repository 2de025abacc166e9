#pragma once
// User-facing YAML files -> core types: task specs (`gpusched submit -f job.yaml`) and the
// GPU-memory table (CN109992422A claim 1). Text in, values out: no file is opened here.
//
// Errors name the source, the line, the field and the value, e.g.
//   job.yaml:3: unknown field "gpu_memory" (known fields: name, gpus, gpu_mem, ...)
//   job.yaml:4: gpu_mem: "-5GiB": must be >= 0
// Unknown fields are errors, never ignored: a typo must not silently change a job.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/memory_table.h"
#include "core/task.h"
#include "spec/env_export.h"

namespace YAML {
class Node;
}

namespace gpusched::spec {

// A job file: the task spec, and what the submitter's environment adds to it.
struct JobFile {
  core::TaskSpec spec;
  // `export:` (env_export.h): a string in --export's syntax or a list of items; absent = not
  // given (the flag's or the default's).
  std::optional<EnvExport> export_env;
};

// The fields of a job file, in the order they are read (docs/job-spec.md's table lists the
// same): the one schema of the YAML file and of the REST body (server/rest_params.h).
const std::vector<std::string>& JobFileFields();

// A job given as a mapping already read: the REST body, JSON turned into YAML nodes, comes
// this way. `source` starts each error ("" = none: the error starts with the field).
StatusOr<JobFile> ParseJobFileNode(const YAML::Node& doc, std::string_view source);

// Parses one job file. `source` names the text in errors (a file name or "<stdin>"). An
// `env:` name reserved for gpusched (GPUSCHED_*) is an error naming it and its line.
StatusOr<JobFile> ParseJobFileYaml(std::string_view text, std::string_view source);
// The spec of ParseJobFileYaml alone (`export:` is checked, then left to the caller).
StatusOr<core::TaskSpec> ParseTaskSpecYaml(std::string_view text, std::string_view source);

// Adds the rows and formulas of a memory-table document to `table`. On error `table` is
// unchanged.
Status LoadMemoryTableYaml(std::string_view text, std::string_view source,
                           core::GpuMemoryTable* table);

}  // namespace gpusched::spec
