# dispatch_install_test (cmake -P): installs BUILD_DIR into PREFIX, checks the installed tree
# (versioned SONAME, only gpusched_* exported, headers, gpusched.pc), builds SOURCE with nothing
# but `pkg-config --cflags --libs gpusched` and runs it; with PYTHON, imports the installed
# package without GPUSCHED_C_LIB, so its loader must find the library next to itself; with JAVA
# (and JNA_JAR, JNI_DIR), loads the library through the installed jar the same way. Each of the
# three also runs an asynchronous acquire (issue 42) through the installed library.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
foreach(f lib/libgpusched_c.so.1 lib/libgpusched_c.so include/gpusched/gpusched_c.h
          include/gpusched/gpusched_chunks_c.h lib/pkgconfig/gpusched.pc
          lib/python3/dist-packages/gpusched/__init__.py)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

# Issue 42: with CUDA, the plugin is installed beside the library (and the client checks that
# the installed library loads it).
set(cuda_flags "")
if(CUDA_PLUGIN)
  if(NOT EXISTS ${PREFIX}/lib/libgpusched_cuda.so.1)
    message(FATAL_ERROR "not installed: lib/libgpusched_cuda.so.1 (the CUDA plugin)")
  endif()
  set(cuda_flags -DGPUSCHED_EXPECT_CUDA_PLUGIN)
endif()

execute_process(COMMAND nm -D --defined-only ${PREFIX}/lib/libgpusched_c.so.1
                OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
string(REGEX MATCHALL "[^\n]+" lines "${symbols}")
set(exported 0)
foreach(line IN LISTS lines)
  if(line MATCHES " gpusched_[a-z_0-9]+(@@GPUSCHED_C_1(\\.[0-9]+)?)?$")
    math(EXPR exported "${exported} + 1")
  elseif(NOT line MATCHES " A GPUSCHED_C_1(\\.[0-9]+)?$")
    message(FATAL_ERROR "exported symbol that is not part of the C ABI: ${line}")
  endif()
endforeach()
message(STATUS "libgpusched_c.so.1 exports ${exported} gpusched_* symbols")
if(NOT symbols MATCHES " gpusched_dispatcher_acquire_async@@GPUSCHED_C_1\\.3\n")
  message(FATAL_ERROR "gpusched_dispatcher_acquire_async is not exported as GPUSCHED_C_1.3")
endif()
if(NOT symbols MATCHES " gpusched_dispatcher_acquire2_async@@GPUSCHED_C_1\\.6\n")
  message(FATAL_ERROR "gpusched_dispatcher_acquire2_async is not exported as GPUSCHED_C_1.6")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${PREFIX}/lib/pkgconfig
                        ${PKG_CONFIG} --cflags --libs gpusched
                OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs gpusched failed")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
separate_arguments(extra UNIX_COMMAND "${EXTRA_FLAGS}")  # the sanitizer builds' flags
execute_process(COMMAND ${CC} -std=c11 -Wall -Werror ${extra} ${cuda_flags} ${SOURCE}
                        -o ${PREFIX}/installed_client
                        ${flags}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building a client from the installed tree failed (flags: ${flags})")
endif()
execute_process(COMMAND ${PREFIX}/installed_client RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the installed client failed: ${rc}")
endif()

if(PYTHON)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=GPUSCHED_C_LIB
            PYTHONPATH=${PREFIX}/lib/python3/dist-packages ${PYTHON} -c
            "import asyncio, gpusched; d = gpusched.Dispatcher(1, [gpusched.Service('s')]); d.release(asyncio.run(d.acquire_async('s'))); d.close(); print('installed python package OK, acquire_async too')"
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the installed Python package could not load the installed library")
  endif()
endif()

if(JAVA AND EXISTS ${PREFIX}/share/java/gpusched.jar)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=GPUSCHED_C_LIB
            ${JAVA} -Djna.boot.library.path=${JNI_DIR}
            -cp ${JNA_JAR}:${PREFIX}/share/java/gpusched.jar io.gpusched.Version --check-async
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the installed jar could not load the installed library")
  endif()
endif()
