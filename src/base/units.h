#pragma once
// Parsing and printing of the sizes and durations users type: "80GiB", "512MiB", "1.5GiB";
// "30s", "5m", "2h", "250ms". Sizes are MiB internally, durations ms.
//
// Errors name the field the text came from, e.g. `gpu_mem: "12XB" is not a size ...`.

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpusched {

using MiB = int64_t;

// Accepts an integer or decimal followed by MiB, GiB or TiB (also M/G/T, case-insensitive), or
// by the decimal MB, GB or TB (10^6, 10^9, 10^12 bytes, rounded to the nearest MiB).
// A bare number is MiB. Negative values are rejected. `field` names the value in errors.
StatusOr<MiB> ParseSizeMiB(std::string_view text, std::string_view field);

// Accepts a number followed by ms, s, m or h. A bare number is seconds.
StatusOr<int64_t> ParseDurationMs(std::string_view text, std::string_view field);

// A point in time as users type it for a report window (`gpusched acct --since D`): an ISO date
// "2026-11-30" (midnight UTC), "2026-11-30T12:00:00Z" (UTC; "T12:00Z" and fractions of a second
// are refused to keep one spelling), or a duration ago ("7d", "12h", "30m": now_ms minus it).
// Returns Unix ms. Errors name the field and the value, e.g. `since: "yesterday" is not ...`.
StatusOr<int64_t> ParseTimePointMs(std::string_view text, std::string_view field, int64_t now_ms);

// "80GiB", "1.5GiB", "512MiB".
std::string FormatSizeMiB(MiB mib);
// "1h30m", "45s", "250ms".
std::string FormatDurationMs(int64_t ms);

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d);

}  // namespace gpusched
