# Included at the end of project() of the framework's top-level CMakeLists.txt (through
# CMAKE_PROJECT_convlab_INCLUDE) when the grader builds a pristine copy of the framework once
# per framework version. When the top-level directory is done it exports the framework
# libraries, the settings they were compiled with and the facts the grader's checks need, so
# that each submission's project (grader/builder/project/) compiles only the team's files and
# the harness and links against this build. Nothing here changes the framework's own build.

# The libraries a submission links (never convlab_variants: it pulls in the staff solutions).
set(CONVLAB_GRADER_LIBRARIES convlab_core convlab_model convlab_cpu convlab_network
    convlab_data)

function(_convlab_grader_export)
  set(libraries ${CONVLAB_GRADER_LIBRARIES})
  if(TARGET convlab_gpu)
    list(APPEND libraries convlab_cuda convlab_cublas_on_demand convlab_gpu)
  endif()
  set(dir "${CMAKE_BINARY_DIR}")
  export(TARGETS convlab_flags ${libraries} FILE "${dir}/convlab-framework-targets.cmake")

  # The settings a submission is compiled with: the same compilers, flags and architectures.
  # Read twice: as the initial cache (-C, the CACHE entries) and included after project().
  set(out "# Written by grader/builder/framework/export.cmake: how the framework was built.\n")
  foreach(var CMAKE_BUILD_TYPE CMAKE_CXX_COMPILER CMAKE_CXX_FLAGS CMAKE_CXX_FLAGS_RELEASE
              CMAKE_CXX_FLAGS_DEBUG CMAKE_CXX_FLAGS_RELWITHDEBINFO CMAKE_EXE_LINKER_FLAGS
              CMAKE_MAKE_PROGRAM CONVLAB_CUDA CONVLAB_WARNINGS_AS_ERRORS CONVLAB_SANITIZE
              CONVLAB_NATIVE)
    string(APPEND out "set(${var} \"${${var}}\" CACHE STRING \"\")\n")
  endforeach()
  if(CONVLAB_CUDA)
    foreach(var CMAKE_CUDA_COMPILER CMAKE_CUDA_HOST_COMPILER CMAKE_CUDA_ARCHITECTURES
                CMAKE_CUDA_FLAGS CMAKE_CUDA_FLAGS_RELEASE CMAKE_CUDA_FLAGS_DEBUG
                CMAKE_CUDA_FLAGS_RELWITHDEBINFO CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
      if(DEFINED ${var} AND NOT "${${var}}" STREQUAL "")
        string(APPEND out "set(${var} \"${${var}}\" CACHE STRING \"\")\n")
      endif()
    endforeach()
  endif()
  foreach(var CMAKE_CXX_STANDARD CMAKE_CXX_STANDARD_REQUIRED CMAKE_CXX_EXTENSIONS
              CMAKE_POSITION_INDEPENDENT_CODE PROJECT_VERSION)
    string(APPEND out "set(CONVLAB_FRAMEWORK_${var} \"${${var}}\")\n")
  endforeach()
  file(WRITE "${dir}/convlab-framework-settings.cmake" "${out}")

  # What to build, and where the archives and the library convolutions' objects land. The
  # harness (grader/worker) does not depend on a team's code: its objects are compiled here
  # once (linked here with the stubs) and every submission links them.
  set(build_targets ${libraries})
  # The stubs too: a submission links the objects of the stubs its team did not change.
  if(TARGET convlab_student)
    list(APPEND build_targets convlab_student)
    file(GENERATE OUTPUT "${dir}/convlab-framework-student-objects.txt"
         CONTENT "$<JOIN:$<TARGET_OBJECTS:convlab_student>,\n>\n")
  endif()
  # The team's harness is compiled here once; the referee is built and run from here: it never
  # holds a team's code, so one build serves every submission.
  if(TARGET convlab-team)
    list(APPEND build_targets convlab-team convlab-check)
    file(GENERATE OUTPUT "${dir}/convlab-framework-harness-objects.txt"
         CONTENT "$<JOIN:$<TARGET_OBJECTS:convlab-team>,\n>\n")
    file(GENERATE OUTPUT "${dir}/convlab-framework-referee-path.txt"
         CONTENT "$<TARGET_FILE:convlab-check>\n")
  endif()
  string(REPLACE ";" "\n" text "${build_targets}")
  file(WRITE "${dir}/convlab-framework-build-targets.txt" "${text}\n")
  set(archives "")
  set(objects "")
  foreach(lib IN LISTS libraries)
    string(APPEND archives "$<TARGET_FILE:${lib}>\n")
    string(APPEND objects "$<JOIN:$<TARGET_OBJECTS:${lib}>,\n>\n")
  endforeach()
  file(GENERATE OUTPUT "${dir}/convlab-framework-archives.txt" CONTENT "${archives}")
  file(GENERATE OUTPUT "${dir}/convlab-framework-objects.txt" CONTENT "${objects}")

  # The libraries a program links besides the framework: a team's code may not redefine
  # their functions (a patched clock, a patched synchronisation).
  set(runtime "")
  foreach(name libc.so.6 libm.so.6 libstdc++.so.6 libgcc_s.so.1)
    execute_process(COMMAND "${CMAKE_CXX_COMPILER}" -print-file-name=${name}
                    OUTPUT_VARIABLE path OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(IS_ABSOLUTE "${path}" AND EXISTS "${path}")
      string(APPEND runtime "${path}\n")
    endif()
  endforeach()
  foreach(target CUDA::cudart CUDA::cudart_static CUDA::cublas CUDA::cublasLt CUDNN::cudnn)
    if(TARGET ${target})
      get_target_property(path ${target} IMPORTED_LOCATION)
      if(path)
        string(APPEND runtime "${path}\n")
      endif()
    endif()
  endforeach()
  file(WRITE "${dir}/convlab-framework-runtime.txt" "${runtime}")

  # The folders any code may include from: the compilers' own and the CUDA toolkit's.
  execute_process(COMMAND "${CMAKE_CXX_COMPILER}" -E -x c++ -v /dev/null
                  OUTPUT_QUIET ERROR_VARIABLE verbose)
  string(REGEX MATCH "#include <...> search starts here:\n(.*)\nEnd of search list" _ "${verbose}")
  string(REPLACE "\n" ";" search "${CMAKE_MATCH_1}")
  set(includes "")
  foreach(line IN LISTS search)
    string(STRIP "${line}" line)
    if(IS_DIRECTORY "${line}")
      string(APPEND includes "${line}\n")
    endif()
  endforeach()
  if(CONVLAB_CUDA)
    foreach(path ${CUDAToolkit_INCLUDE_DIRS} ${CUDNN_INCLUDE_DIR})
      string(APPEND includes "${path}\n")
    endforeach()
  endif()
  file(WRITE "${dir}/convlab-framework-include-dirs.txt" "${includes}")
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _convlab_grader_export)
