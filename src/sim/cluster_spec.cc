#include "sim/cluster_spec.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sim/csv_fields.h"

namespace gpusched::sim {
namespace {

core::NodeSpec MakeNode(std::string name, int64_t gpus, MiB gpu_mib, const std::string& model,
                        core::Resources capacity) {
  core::NodeSpec n;
  n.name = std::move(name);
  n.address = n.name;
  n.capacity = capacity;
  n.gpus.assign(static_cast<size_t>(gpus), core::GpuSpec{model, gpu_mib});
  return n;
}

}  // namespace

StatusOr<std::vector<core::NodeSpec>> ParseClusterSpec(std::string_view spec) {
  const std::string text(spec);
  auto bad = [&](const std::string& why) {
    return InvalidArgument("cluster: \"" + text + "\" " + why +
                           " (expected NxG[xMEM], e.g. 100x8 or 1x64x80GiB)");
  };
  const auto parts = SplitCountSpec(spec, 2, 3, "cluster", "NxG[xMEM], e.g. 100x8 or 1x64x80GiB");
  if (!parts.ok()) return parts.status();
  const auto nodes = ParseWholeNumber((*parts)[0], 1, 1'000'000, "cluster N");
  const auto gpus = ParseWholeNumber((*parts)[1], 0, 1024, "cluster G");
  // Each says what it got: "1.5x8" and "99999999x8" said "needs N >= 1 nodes".
  if (!nodes.ok()) {
    return bad("has N \"" + std::string((*parts)[0]) +
               "\", not a whole number of nodes from 1 to 1000000");
  }
  if (!gpus.ok()) {
    return bad("has G \"" + std::string((*parts)[1]) +
               "\", not a whole number of GPUs from 0 to 1024");
  }
  MiB gpu_mib = kDefaultUniformGpuMib;
  if (parts->size() == 3) {
    GS_ASSIGN_OR_RETURN(gpu_mib, ParseSizeMiB((*parts)[2], "cluster MEM"));
    if (gpu_mib <= 0) return bad("needs MEM > 0");
  }
  const int64_t per = std::max<int64_t>(1, *gpus);
  const core::Resources capacity{12'000 * per, 96 * 1024 * per};
  std::vector<core::NodeSpec> out;
  out.reserve(static_cast<size_t>(*nodes));
  char name[32];
  for (int64_t i = 0; i < *nodes; ++i) {
    std::snprintf(name, sizeof name, "node-%04lld", static_cast<long long>(i));
    out.push_back(MakeNode(name, *gpus, gpu_mib, "gpu", capacity));
  }
  return out;
}

StatusOr<std::vector<core::NodeSpec>> LoadNodeList(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgument("nodes: " + path + " is a directory, not a node list");
  }
  std::ifstream in(path);
  if (!in) return NotFound("nodes: cannot open " + path);
  std::string line;
  if (!std::getline(in, line)) return InvalidArgument(path + ":1: empty file (no header)");
  const CsvHeader h(SplitCsvLine(line));
  const int sn = h.Find("sn"), cpu = h.Find("cpu_milli"), mem = h.Find("memory_mib"),
            gpu = h.Find("gpu"), model = h.Find("model"), gmem = h.Find("gpu_mem_mib");
  for (auto [i, name] : {std::pair{sn, "sn"}, {cpu, "cpu_milli"}, {mem, "memory_mib"},
                         {gpu, "gpu"}}) {
    if (i < 0) return InvalidArgument(path + ":1: header: missing column \"" + name + "\"");
  }
  std::vector<core::NodeSpec> out;
  int64_t line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto f = SplitCsvLine(line);
    const CsvPos pos{&path, line_no};
    if (f.size() < h.size()) {
      return InvalidArgument(path + ":" + std::to_string(line_no) + ": " +
                             std::to_string(f.size()) + " fields, the header has " +
                             std::to_string(h.size()));
    }
    GS_ASSIGN_OR_RETURN(int64_t cpu_milli, ParseInt(f[cpu], pos, "cpu_milli"));
    GS_ASSIGN_OR_RETURN(int64_t mem_mib, ParseInt(f[mem], pos, "memory_mib"));
    GS_ASSIGN_OR_RETURN(int64_t gpus, ParseInt(f[gpu], pos, "gpu"));
    MiB gpu_mib = kDefaultListGpuMib;
    if (gmem >= 0) {
      GS_ASSIGN_OR_RETURN(gpu_mib, ParseInt(f[gmem], pos, "gpu_mem_mib"));
    }
    if (cpu_milli < 0 || mem_mib < 0 || gpus < 0 || gpus > 1024 || gpu_mib <= 0) {
      return InvalidArgument(path + ":" + std::to_string(line_no) +
                             ": cpu_milli, memory_mib and gpu must be >= 0 (gpu <= 1024) and "
                             "gpu_mem_mib > 0");
    }
    out.push_back(MakeNode(std::string(f[sn]), gpus, gpu_mib,
                           model >= 0 ? std::string(f[model]) : "gpu", {cpu_milli, mem_mib}));
  }
  if (out.empty()) return InvalidArgument(path + ": no nodes");
  return out;
}

ClusterTotals Totals(const std::vector<core::NodeSpec>& nodes) {
  ClusterTotals t;
  t.nodes = static_cast<int64_t>(nodes.size());
  for (const core::NodeSpec& n : nodes) {
    t.max_node_gpus = std::max(t.max_node_gpus, static_cast<int64_t>(n.gpus.size()));
    for (const core::GpuSpec& g : n.gpus) {
      ++t.gpus;
      t.gpu_mib += g.total_mib;
      t.smallest_gpu_mib = t.smallest_gpu_mib == 0 ? g.total_mib
                                                   : std::min(t.smallest_gpu_mib, g.total_mib);
    }
  }
  return t;
}

}  // namespace gpusched::sim
