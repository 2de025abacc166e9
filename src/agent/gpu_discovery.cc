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
  const size_t x = text.find('x');
  if (x == std::string::npos || x == 0) {
    return InvalidArgument("gpus: \"" + text + "\" is not COUNTxSIZE, e.g. 8x80GiB");
  }
  int64_t count = 0;
  try {
    size_t used = 0;
    count = std::stoll(text.substr(0, x), &used);
    if (used != x) count = -1;
  } catch (const std::exception&) {  // stoll: not a number
    count = -1;
  }
  if (count < 1 || count > 64) {
    return InvalidArgument("gpus: count in \"" + text + "\" must be 1..64");
  }
  GS_ASSIGN_OR_RETURN(MiB size, ParseSizeMiB(text.substr(x + 1), "gpus"));
  if (size <= 0) return InvalidArgument("gpus: size in \"" + text + "\" must be > 0");
  return std::vector<GpuInfo>(static_cast<size_t>(count),
                              GpuInfo{"SIM-" + FormatSizeMiB(size), size});
}

std::unique_ptr<GpuDiscovery> MakeSimulatedGpus(std::vector<GpuInfo> gpus) {
  return std::make_unique<SimulatedGpus>(std::move(gpus));
}

}  // namespace gpusched::agent
