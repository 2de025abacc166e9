#include "agent/gpu_discovery.h"

namespace gpusched::agent {
namespace {

class SimulatedGpus final : public GpuDiscovery {
 public:
  explicit SimulatedGpus(std::vector<GpuInfo> gpus) : gpus_(std::move(gpus)) {}
  const std::vector<GpuInfo>& gpus() const override { return gpus_; }
  std::vector<MiB> FreeMib() override { return std::vector<MiB>(gpus_.size(), -1); }
  bool simulated() const override { return true; }

 private:
  std::vector<GpuInfo> gpus_;
};

}  // namespace

StatusOr<std::vector<GpuInfo>> ParseGpuList(const std::string& text) {
  if (text == "0") return std::vector<GpuInfo>{};
  GS_ASSIGN_OR_RETURN(const std::vector<std::string_view> parts,
                      SplitCountSpec(text, 2, 2, "gpus", "COUNTxSIZE, e.g. 8x80GiB"));
  const StatusOr<int64_t> count = ParseWholeNumber(parts[0], 1, 64, "gpus count");
  if (!count.ok()) return InvalidArgument("gpus: count in \"" + text + "\" must be 1..64");
  GS_ASSIGN_OR_RETURN(MiB size, ParseSizeMiB(parts[1], "gpus"));
  if (size <= 0) return InvalidArgument("gpus: size in \"" + text + "\" must be > 0");
  return std::vector<GpuInfo>(static_cast<size_t>(*count),
                              GpuInfo{"SIM-" + FormatSizeMiB(size), size});
}

std::unique_ptr<GpuDiscovery> MakeSimulatedGpus(std::vector<GpuInfo> gpus) {
  return std::make_unique<SimulatedGpus>(std::move(gpus));
}

}  // namespace gpusched::agent
