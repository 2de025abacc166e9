#pragma once
// Rng: seeded, deterministic randomness. Outside base/ nothing uses std::random_device or
// rand(); a component that needs randomness takes an `Rng&` so tests can fix the seed and
// every randomised run prints the seed it used.
//
// Thread-safety: not thread-safe; give each thread its own Rng.

#include <cstdint>
#include <random>

namespace gpusched {

class Rng {
 public:
  explicit Rng(uint64_t seed) : seed_(seed), engine_(seed) {}

  uint64_t seed() const { return seed_; }
  // Uniform integer in [lo, hi]. REQUIRES: lo <= hi.
  int64_t UniformInt(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  // Uniform real in [0, 1).
  double Uniform01() { return std::uniform_real_distribution<double>(0.0, 1.0)(engine_); }
  bool Bernoulli(double p) { return Uniform01() < p; }
  double Exponential(double rate) { return std::exponential_distribution<double>(rate)(engine_); }
  double LogNormal(double mu, double sigma) {
    return std::lognormal_distribution<double>(mu, sigma)(engine_);
  }
  std::mt19937_64& engine() { return engine_; }

  // A seed from the operating system's entropy, for tools whose user gave no --seed
  // (the tool must print it).
  static uint64_t FreshSeed();

 private:
  uint64_t seed_;
  std::mt19937_64 engine_;
};

}  // namespace gpusched
