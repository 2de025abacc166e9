#include "extender/quantity.h"

#include <string>

namespace gpusched::extender {
namespace {

__extension__ typedef __int128 Int128;  // GCC and Clang; -Wpedantic wants the marker

constexpr int kMaxDigits = 30;     // significant digits kept exactly in 128 bits
constexpr int kMaxExponent = 36;   // |10^e| and |2^e/3| handled without overflow checks

struct Suffix {
  int exp10 = 0;
  int exp2 = 0;
};

// Maps the suffix text to its scale; false when it is not a Kubernetes suffix.
bool ParseSuffix(std::string_view s, Suffix& out) {
  static constexpr std::pair<std::string_view, Suffix> kSuffixes[] = {
      {"", {0, 0}},    {"n", {-9, 0}},  {"u", {-6, 0}},  {"m", {-3, 0}},  {"k", {3, 0}},
      {"M", {6, 0}},   {"G", {9, 0}},   {"T", {12, 0}},  {"P", {15, 0}},  {"E", {18, 0}},
      {"Ki", {0, 10}}, {"Mi", {0, 20}}, {"Gi", {0, 30}}, {"Ti", {0, 40}}, {"Pi", {0, 50}},
      {"Ei", {0, 60}}};
  for (const auto& [text, suffix] : kSuffixes) {
    if (s == text) {
      out = suffix;
      return true;
    }
  }
  // Decimal exponent: e or E followed by an optionally signed integer.
  if (s.size() >= 2 && (s[0] == 'e' || s[0] == 'E')) {
    size_t i = 1;
    bool negative = false;
    if (s[i] == '+' || s[i] == '-') negative = s[i++] == '-';
    if (i >= s.size()) return false;
    int v = 0;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      v = v * 10 + (s[i] - '0');
      if (v > 1000) return false;
    }
    out = {negative ? -v : v, 0};
    return true;
  }
  return false;
}

bool MulOverflows(Int128& acc, Int128 factor) {
  return __builtin_mul_overflow(acc, factor, &acc);
}

}  // namespace

StatusOr<int64_t> ParseQuantity(std::string_view text, int scale10, int scale2, Rounding rounding,
                                std::string_view field) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgument(std::string(field) + ": \"" + std::string(text) + "\" " + why);
  };
  size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    if (text[i] == '-') return bad("is negative");
    ++i;
  }
  Int128 mantissa = 0;
  int digits = 0, fraction_digits = 0;
  bool any_digit = false, in_fraction = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !in_fraction) {
      in_fraction = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    any_digit = true;
    if (mantissa == 0 && c == '0') {  // leading zeros carry no precision
      if (in_fraction) ++fraction_digits;
      continue;
    }
    if (++digits > kMaxDigits) return bad("has too many digits");
    mantissa = mantissa * 10 + (c - '0');
    if (in_fraction) ++fraction_digits;
  }
  if (!any_digit) return bad("is not a Kubernetes quantity (expected a number like 8, 500m, 64Gi)");
  Suffix suffix;
  if (!ParseSuffix(text.substr(i), suffix)) {
    return bad("has an unknown suffix \"" + std::string(text.substr(i)) +
               "\" (use Ki Mi Gi Ti Pi Ei, n u m k M G T P E or an exponent)");
  }
  // value = mantissa * 10^e10 * 2^e2, in the requested unit.
  const int e10 = suffix.exp10 - fraction_digits - scale10;
  const int e2 = suffix.exp2 - scale2;
  if (mantissa == 0) return int64_t{0};
  if (e10 > kMaxExponent || e2 > 3 * kMaxExponent) return bad("is too large");
  Int128 num = mantissa, den = 1;
  bool overflow = false;
  for (int k = 0; k < e10; ++k) overflow |= MulOverflows(num, 10);
  for (int k = 0; k < -e10 && !overflow; ++k) overflow |= MulOverflows(den, 10);
  for (int k = 0; k < e2 && !overflow; ++k) overflow |= MulOverflows(num, 2);
  for (int k = 0; k < -e2 && !overflow; ++k) overflow |= MulOverflows(den, 2);
  if (overflow) return bad("is outside the supported range");
  Int128 q = num / den;
  const bool whole = num % den == 0;
  if (!whole) {
    if (rounding == Rounding::kExact) return bad("is not a whole number");
    if (rounding == Rounding::kUp) ++q;
  }
  if (q > INT64_MAX) return bad("is too large");
  return static_cast<int64_t>(q);
}

}  // namespace gpusched::extender
