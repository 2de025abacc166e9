#include "dispatch/chunks/kernels.h"

#include <cstring>

namespace gpusched::chunks {
namespace {

// Element access through memcpy: device copies carry no alignment promise.
template <typename T>
T Load(const std::byte* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T>
void Store(std::byte* p, int64_t i, T v) {
  std::memcpy(p + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

template <typename T, typename Op>
Kernel MapKernel(std::string name, int inputs, Op op) {
  Kernel k;
  k.name = std::move(name);
  k.kind = KernelKind::kMap;
  k.inputs = inputs;
  k.element_bytes = sizeof(T);
  // The one- and two-input loops are separate so that neither tests in1 per element and both
  // vectorize (kernels.cc is built with -O3; see CMakeLists.txt).
  k.run = [op](const ChunkIo& io, const KernelParams& params) {
    // A local copy: stores through io.out (std::byte, which may alias anything) would otherwise
    // force a reload of params.scalar and its conversion on every element.
    const KernelParams p = params;
    const int64_t n = io.in_bytes / static_cast<int64_t>(sizeof(T));
    if (io.in1 == nullptr) {
      for (int64_t i = 0; i < n; ++i) Store<T>(io.out, i, op(Load<T>(io.in0, i), T{}, p));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        Store<T>(io.out, i, op(Load<T>(io.in0, i), Load<T>(io.in1, i), p));
      }
    }
    return Status::Ok();
  };
  return k;
}

void AddU64(std::byte* acc, const std::byte* partial, int64_t bytes) {
  for (int64_t i = 0; i < bytes / 8; ++i) {
    Store<uint64_t>(acc, i, Load<uint64_t>(acc, i) + Load<uint64_t>(partial, i));
  }
}

Kernel SumU32() {
  Kernel k;
  k.name = "sum_u32";
  k.kind = KernelKind::kReduce;
  k.result_bytes = [](const KernelParams&) { return int64_t{8}; };
  k.run = [](const ChunkIo& io, const KernelParams&) {
    uint64_t sum = 0;
    for (int64_t i = 0; i < io.in_bytes / 4; ++i) sum += Load<uint32_t>(io.in0, i);
    Store<uint64_t>(io.out, 0, sum);
    return Status::Ok();
  };
  k.combine = AddU64;
  return k;
}

// Equal-width bins over the whole uint32 range: bin = value * bins / 2^32.
Kernel HistogramU32() {
  Kernel k;
  k.name = "histogram_u32";
  k.kind = KernelKind::kReduce;
  k.result_bytes = [](const KernelParams& p) { return p.bins * 8; };
  k.run = [](const ChunkIo& io, const KernelParams& p) {
    std::vector<uint64_t> counts(static_cast<size_t>(p.bins), 0);
    const auto bins = static_cast<uint64_t>(p.bins);
    for (int64_t i = 0; i < io.in_bytes / 4; ++i) {
      ++counts[(uint64_t{Load<uint32_t>(io.in0, i)} * bins) >> 32];
    }
    std::memcpy(io.out, counts.data(), counts.size() * 8);
    return Status::Ok();
  };
  k.combine = AddU64;
  return k;
}

}  // namespace

std::unique_ptr<KernelRegistry> KernelRegistry::WithBuiltins(
    const std::function<void(Kernel&)>& extend) {
  auto r = std::make_unique<KernelRegistry>();
  auto must = [&](Kernel k) {
    if (extend) extend(k);
    Status s = r->Register(std::move(k));
    (void)s;  // built-in names are distinct and valid
  };
  must(MapKernel<uint32_t>("vadd_u32", 2, [](uint32_t a, uint32_t b, const KernelParams&) {
    return a + b;  // modulo 2^32, like Java int arithmetic
  }));
  must(MapKernel<uint32_t>("scale_u32", 1, [](uint32_t a, uint32_t, const KernelParams& p) {
    return a * static_cast<uint32_t>(static_cast<int64_t>(p.scalar));
  }));
  must(MapKernel<float>("vadd_f32", 2, [](float a, float b, const KernelParams&) { return a + b; }));
  must(MapKernel<float>("scale_f32", 1, [](float a, float, const KernelParams& p) {
    return a * static_cast<float>(p.scalar);
  }));
  must(SumU32());
  must(HistogramU32());
  return r;
}

Status KernelRegistry::Register(Kernel kernel) {
  if (kernel.name.empty()) return InvalidArgument("kernel.name: must not be empty");
  const std::string& n = kernel.name;
  if (!kernel.run) return InvalidArgument("kernel " + n + ": run: must be set");
  if (kernel.inputs != 1 && kernel.inputs != 2) {
    return InvalidArgument("kernel " + n + ": inputs: must be 1 or 2, got " +
                           std::to_string(kernel.inputs));
  }
  if (kernel.element_bytes <= 0) {
    return InvalidArgument("kernel " + n + ": element_bytes: must be > 0, got " +
                           std::to_string(kernel.element_bytes));
  }
  if (kernel.kind == KernelKind::kReduce && (!kernel.result_bytes || !kernel.combine)) {
    return InvalidArgument("kernel " + n + ": a reduce kernel needs result_bytes and combine");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (kernels_.count(n) != 0) return AlreadyExists("kernel " + n + ": already registered");
  auto owned = std::make_unique<Kernel>(std::move(kernel));
  const std::string key = owned->name;
  kernels_.emplace(key, std::move(owned));
  return Status::Ok();
}

StatusOr<const Kernel*> KernelRegistry::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kernels_.find(name);
  if (it == kernels_.end()) return NotFound("kernel: unknown kernel \"" + name + "\"");
  return static_cast<const Kernel*>(it->second.get());
}

std::vector<std::string> KernelRegistry::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, k] : kernels_) names.push_back(name);
  return names;
}

Status ValidateParams(const Kernel& kernel, const KernelParams& params) {
  if (kernel.name == "histogram_u32" && (params.bins <= 0 || params.bins > (int64_t{1} << 24))) {
    return InvalidArgument("params.bins: must be in [1, 16777216], got " +
                           std::to_string(params.bins));
  }
  if (kernel.kind == KernelKind::kReduce && kernel.result_bytes(params) <= 0) {
    return InvalidArgument("kernel " + kernel.name + ": result_bytes must be > 0");
  }
  return Status::Ok();
}

}  // namespace gpusched::chunks
