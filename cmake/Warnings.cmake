# gpusched_warnings: an interface target every gpusched target links PRIVATE.
add_library(gpusched_warnings INTERFACE)
target_compile_options(gpusched_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor
    -Wimplicit-fallthrough>)
if(GPUSCHED_WERROR)
  target_compile_options(gpusched_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

# gpusched_concurrency_test(target): the test binary `target` carries the `concurrency` label;
# the `concurrency_tests` target (top-level CMakeLists.txt) builds every such binary and
# nothing else, which is what `./run tsan` builds.
function(gpusched_concurrency_test target)
  set_property(GLOBAL APPEND PROPERTY GPUSCHED_CONCURRENCY_TESTS ${target})
endfunction()

# gpusched_add_test(name SOURCES ... LIBS ... [LABELS ...]): a GoogleTest binary registered
# with ctest. LABELS (e.g. concurrency, run by ./run tsan) apply to every test of the binary.
function(gpusched_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main
                        gpusched_warnings)
  if("concurrency" IN_LIST ARG_LABELS)
    gpusched_concurrency_test(${name})
  endif()
  if(ARG_LABELS)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${ARG_LABELS}")
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
  endif()
endfunction()

# gpusched_skipped_test(name reason): registers `name` as a test that ctest reports as skipped
# (not passed, not failed) when a tool it needs is missing, so the test's absence is visible.
function(gpusched_skipped_test name reason)
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E echo "SKIPPED: ${reason}")
  set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED:")
endfunction()
