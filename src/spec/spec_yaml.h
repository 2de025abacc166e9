#pragma once
// User-facing YAML files -> core types: task specs (`gpusched submit -f job.yaml`) and the
// GPU-memory table (CN109992422A claim 1). Text in, values out: no file is opened here.
//
// Errors name the source, the line, the field and the value, e.g.
//   job.yaml:3: unknown field "gpu_memory" (known fields: name, gpus, gpu_mem, ...)
//   job.yaml:4: gpu_mem: "-5GiB": must be >= 0
// Unknown fields are errors, never ignored: a typo must not silently change a job.

#include <string>
#include <string_view>

#include "base/status.h"
#include "core/memory_table.h"
#include "core/task.h"

namespace gpusched::spec {

// Parses one task spec. `source` names the text in errors (a file name or "<stdin>").
StatusOr<core::TaskSpec> ParseTaskSpecYaml(std::string_view text, std::string_view source);

// Adds the rows and formulas of a memory-table document to `table`. On error `table` is
// unchanged.
Status LoadMemoryTableYaml(std::string_view text, std::string_view source,
                           core::GpuMemoryTable* table);

}  // namespace gpusched::spec
