#pragma once
// What a fuzz target asserts beyond "does not crash". A failed FUZZ_REQUIRE prints the
// condition and a detail (the Status message, the value) and aborts, which libFuzzer and the
// replay test both report as a crash of that input.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#define FUZZ_REQUIRE(cond, detail)                                              \
  do {                                                                          \
    if (!(cond)) ::gpusched::fuzz::Fail(__FILE__, __LINE__, #cond, (detail));   \
  } while (0)

namespace gpusched::fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* cond,
                              const std::string& detail) {
  std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n  %s\n", file, line, cond,
               detail.c_str());
  std::abort();
}

inline std::string_view Text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace gpusched::fuzz
