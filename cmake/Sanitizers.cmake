# Sanitizer builds instrument C and C++ only: nvcc does not take -fsanitize, and the CUDA
# backend's device code cannot be instrumented anyway.
if(GPUSCHED_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
endif()
if(GPUSCHED_TSAN)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=thread>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=thread)
endif()
# The libFuzzer build: every library gets the fuzzer's coverage instrumentation and
# ASan+UBSan (UB aborts, so the fuzzer sees it as a crash); fuzz/ links the fuzzer's main.
if(GPUSCHED_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "GPUSCHED_FUZZ needs clang (CC=clang-19 CXX=clang++-19)")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link,address,undefined>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=undefined>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-Wno-unknown-warning-option>)  # GCC's -Wshadow=local
  add_link_options(-fsanitize=address,undefined)
endif()
