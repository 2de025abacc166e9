# Issue 42 (cmake -P): none of FILES (;-separated shared objects) may list libcudart or libcuda
# as NEEDED, so libgpusched_c loads on hosts without CUDA or with another CUDA major, and the
# CUDA plugin needs no libcudart.so.N (it carries the static runtime, which dlopens libcuda).
foreach(f IN LISTS FILES)
  execute_process(COMMAND ${READELF} -d ${f} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${READELF} -d ${f} failed: ${rc}")
  endif()
  string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*" needed "${dynamic}")
  message(STATUS "${f}: ${needed}")
  foreach(line IN LISTS needed)
    if(line MATCHES "\\[libcuda(rt)?\\.so")
      message(FATAL_ERROR "${f} needs a CUDA library: ${line}")
    endif()
  endforeach()
endforeach()
message(STATUS "no libcudart or libcuda NEEDED")
