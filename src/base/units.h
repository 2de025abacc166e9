#pragma once
// Parsing and printing of the sizes and durations users type: "80GiB", "512MiB", "1.5GiB";
// "30s", "5m", "2h", "250ms". Sizes are MiB internally, durations ms.
//
// Errors name the field the text came from, e.g. `gpu_mem: "12XB" is not a size ...`.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpusched {

using MiB = int64_t;

// Accepts an integer or decimal followed by MiB, GiB or TiB (also M/G/T, case-insensitive), or
// by the decimal MB, GB or TB (10^6, 10^9, 10^12 bytes, rounded to the nearest MiB).
// A bare number is MiB. Negative values are rejected. `field` names the value in errors.
StatusOr<MiB> ParseSizeMiB(std::string_view text, std::string_view field);

// Accepts a number followed by ms, s, m or h. A bare number is seconds.
StatusOr<int64_t> ParseDurationMs(std::string_view text, std::string_view field);

// CPU as users (and Kubernetes) write it: cores "4", "0.5", or millicores "500m". Returns
// millicores (fractions of a millicore round to the nearest). Negative values are rejected;
// errors name the field and the value: `cpu: "4x" is not a CPU amount (use 4 or 500m)`.
StatusOr<int64_t> ParseCpuMilli(std::string_view text, std::string_view field);

// A point in time as users type it for a report window (`gpusched acct --since D`): an ISO date
// "2026-11-30" (midnight UTC), "2026-11-30T12:00:00Z" (UTC; "T12:00Z" and fractions of a second
// are refused to keep one spelling), or a duration ago ("7d", "12h", "30m": now_ms minus it).
// Returns Unix ms. Errors name the field and the value, e.g. `since: "yesterday" is not ...`.
StatusOr<int64_t> ParseTimePointMs(std::string_view text, std::string_view field, int64_t now_ms);

// The "NxG" shape of counts users type: a GPU list "8x80GiB", a simulated cluster
// "100x8x80GiB", an image size "224x224". Splits `text` at each 'x' into min_parts..max_parts
// parts, none of them empty; else `field: "2x" is not FORM` (FORM says what was expected,
// e.g. "COUNTxSIZE, e.g. 8x80GiB"). The parts point into `text`.
StatusOr<std::vector<std::string_view>> SplitCountSpec(std::string_view text, size_t min_parts,
                                                       size_t max_parts, std::string_view field,
                                                       std::string_view form);

// A whole number of decimal digits (no sign, no spaces) in [lo, hi]; else
// `field: "x4" is not a whole number from lo to hi`.
StatusOr<int64_t> ParseWholeNumber(std::string_view text, int64_t lo, int64_t hi,
                                   std::string_view field);

// The indices of a job array, first..last inclusive.
struct IndexRange {
  int64_t first = 0;
  int64_t last = 0;
  int64_t count() const { return last - first + 1; }
};

// A job array's indices as users type them (sbatch --array): "A-B" (0 <= A <= B) or one
// index "N", each at most 1,000,000,000, and at most `max_count` indices; else an error
// naming the field and the value.
StatusOr<IndexRange> ParseIndexRange(std::string_view text, int64_t max_count,
                                     std::string_view field);

// "80GiB", "1.5GiB", "512MiB".
std::string FormatSizeMiB(MiB mib);
// "1h30m", "45s", "250ms".
std::string FormatDurationMs(int64_t ms);

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d);

}  // namespace gpusched
