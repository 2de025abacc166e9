#pragma once
// Kubernetes resource quantities ("8", "500m", "64Gi", "1176512552Ki", "1e3") as integers.
//
// The grammar is Kubernetes' (k8s.io/apimachinery resource.Quantity): an optionally signed
// decimal number followed by a binary-SI suffix (Ki Mi Gi Ti Pi Ei), a decimal-SI suffix
// (n u m k M G T P E, or none) or a decimal exponent (e3, E-2). Arithmetic is exact (128-bit
// rational), so "0.1" scaled by 1000 is 100, not 100.00000001.
//
// Errors are InvalidArgument naming the field and the text, e.g.
// `limits["nvidia.com/gpu"]: "1.5" is not a whole number`.

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace gpusched::extender {

enum class Rounding { kUp, kDown, kExact };

// The quantity in units of 10^scale10 * 2^scale2 (e.g. scale2 = 20 for MiB of bytes, scale10
// = -3 for millicores), rounded as asked (kExact: an error unless the result is whole).
// Negative quantities and results outside int64 are errors.
StatusOr<int64_t> ParseQuantity(std::string_view text, int scale10, int scale2, Rounding rounding,
                                std::string_view field);

// A whole, non-negative count, as extended resources must be ("8", "2k").
inline StatusOr<int64_t> ParseWholeQuantity(std::string_view text, std::string_view field) {
  return ParseQuantity(text, 0, 0, Rounding::kExact, field);
}

}  // namespace gpusched::extender
