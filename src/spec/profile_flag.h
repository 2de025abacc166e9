#pragma once
// `gpusched submit --profile MODEL[,type=T][,batch=N][,size=HxW]`: what the task is, so that
// the server's GPU-memory table (CN109992422A claim 1) says how much GPU memory it needs,
// instead of a size. `--profile resnet50` is {model: resnet50, batch 1, the model's
// reference size}; `--profile resnet50,type=classify,batch=32,size=224x224` names a row of
// the table exactly (the same fields as `profile:` in a job file).
//
// Errors name the flag and quote the whole text, e.g.
//   --profile: "resnet50,batch=x": batch "x" is not a whole number >= 1

#include <string>
#include <string_view>

#include "base/status.h"
#include "core/task.h"

namespace gpusched::spec {

StatusOr<core::MemoryProfile> ParseProfileFlag(std::string_view text, std::string_view flag);

// The profile as the flag writes it, shortest form (`gpusched profile ls` keys): the model,
// then type= when set, batch= when not 1, size= when set.
std::string FormatProfileFlag(const core::MemoryProfile& profile);

}  // namespace gpusched::spec
