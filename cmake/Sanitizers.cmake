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
