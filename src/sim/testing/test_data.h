#pragma once

// The folder of the simulator's test traces and cluster files (src/sim/testdata), which CMake
// gives sim_test as GPUSCHED_SIM_TESTDATA. One definition for every test file of the target,
// so that a unity build (GPUSCHED_UNITY) can compile them together.

#include <string>

namespace gpusched::sim::testing {

inline const std::string kData = GPUSCHED_SIM_TESTDATA;

}  // namespace gpusched::sim::testing
