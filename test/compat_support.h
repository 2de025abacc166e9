#pragma once
// Issue 39: reading the recordings of test/compat/VERSION/ (compat_recordings.h), shared by
// compat_checks.cc (every recording parsed) and compat_e2e_test.cc (replayed against a server).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "compat_recordings.h"
#include "gpusched/v1/gpusched.pb.h"

namespace gpusched::testing {

namespace v1 = ::gpusched::v1;

inline const std::filesystem::path kCompatDir = GPUSCHED_COMPAT_DIR;

// The version directories under test/compat, oldest first ("0.1.0" < "0.2.0" < "0.10.0").
inline std::vector<std::filesystem::path> VersionDirs() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(kCompatDir)) {
    if (e.is_directory()) out.push_back(e.path());
  }
  auto parts = [](const std::filesystem::path& p) {
    std::vector<int> v;
    std::stringstream in(p.filename().string());
    for (std::string part; std::getline(in, part, '.');) v.push_back(std::atoi(part.c_str()));
    return v;
  };
  std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return parts(a) < parts(b); });
  return out;
}

inline std::string ReadRecording(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <typename M>
M ParseRecording(const std::string& bytes) {
  M m;
  EXPECT_TRUE(m.ParseFromString(bytes)) << "not a " << m.GetTypeName();
  return m;
}

// m[key], or the mapped type's zero when absent (protobuf's Map::at would abort).
template <typename Map>
typename Map::mapped_type ValueOr(const Map& m, const typename Map::key_type& key) {
  auto it = m.find(key);
  return it == m.end() ? typename Map::mapped_type() : it->second;
}

// Protobuf's wire format, for fields this version does not know (the lite runtime has no
// API for them; it keeps such fields when parsing and writes them back when serializing).
inline std::string Varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7f) | 0x80));
  out.push_back(static_cast<char>(v));
  return out;
}
// Field `number` = `value` as a varint.
inline std::string VarintField(uint32_t number, uint64_t value) {
  return Varint(uint64_t{number} << 3) + Varint(value);
}
// Field `number` holding `bytes` (a string, or a message: appended to a message's bytes, it
// merges into that field's message).
inline std::string BytesField(uint32_t number, const std::string& bytes) {
  return Varint((uint64_t{number} << 3) | 2) + Varint(bytes.size()) + bytes;
}

}  // namespace gpusched::testing
