// `compat_record DIR`: writes this version's recordings (compat_recordings.h) into DIR, e.g.
// test/compat/0.2.0 (docs/upgrades.md "Recordings"). Run by hand once per release; the files
// are committed and never rewritten.

#include <filesystem>
#include <fstream>
#include <iostream>

#include "compat_recordings.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: compat_record DIR   (e.g. test/compat/" GPUSCHED_VERSION ")\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  try {
    std::filesystem::create_directories(dir);
    for (const auto& [name, bytes] :
         gpusched::testing::TodaysRecordings(std::filesystem::temp_directory_path().string())) {
      std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!out) {
        std::cerr << "compat_record: cannot write " << (dir / name).string() << "\n";
        return 1;
      }
      std::cout << (dir / name).string() << " (" << bytes.size() << " bytes)\n";
    }
  } catch (const std::exception& e) {  // filesystem errors, the store's (compat_recordings.cc)
    std::cerr << "compat_record: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
