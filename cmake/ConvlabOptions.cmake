# Compiler flags shared by every convlab target, applied through one interface target.
add_library(convlab_flags INTERFACE)
target_include_directories(convlab_flags INTERFACE "${PROJECT_SOURCE_DIR}")
target_compile_options(convlab_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor>
  # GCC notes that 32-byte vectors (reference/core/simd.hpp) pass differently without AVX;
  # they never cross a boundary built with other flags, so the note is noise.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-psabi>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${CONVLAB_WARNINGS_AS_ERRORS}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${CONVLAB_WARNINGS_AS_ERRORS}>>:-Werror=all-warnings>
  # Line info costs nothing at run time and lets ncu and compute-sanitizer name source lines.
  $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo>)
if(CONVLAB_NATIVE AND NOT CONVLAB_SANITIZE)
  target_compile_options(convlab_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-march=native>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-march=native>)
endif()
if(CONVLAB_SANITIZE)
  target_compile_options(convlab_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined>)
  target_link_options(convlab_flags INTERFACE -fsanitize=address,undefined)
endif()
target_link_libraries(convlab_flags INTERFACE Threads::Threads)
if(CONVLAB_CUDA)
  target_compile_definitions(convlab_flags INTERFACE CONVLAB_HAVE_CUDA=1)
endif()

# Code whose time goes to processes, files and the network rather than to loops (the grader's
# planning and reports, the service, the command-line front ends) builds at -O1: a third less
# compile time, no run time that matters. The convolutions, layers, network, sandbox and
# referee keep the build type's level. Called in a folder's CMakeLists.txt before its targets,
# it covers the folder and those it adds; with SOURCES, those files only; LEVEL -O0 for code
# that only drives other programs and libraries (the tests' own code).
function(convlab_light_optimisation)
  cmake_parse_arguments(L "" "LEVEL" "SOURCES" ${ARGN})
  if(NOT L_LEVEL)
    set(L_LEVEL -O1)
  endif()
  set(optimised $<OR:$<CONFIG:Release>,$<CONFIG:RelWithDebInfo>>)
  set(level $<$<AND:$<COMPILE_LANGUAGE:CXX>,${optimised}>:${L_LEVEL}>)
  if(L_SOURCES)
    set_source_files_properties(${L_SOURCES} PROPERTIES COMPILE_OPTIONS "${level}")
  else()
    add_compile_options(${level})
  endif()
endfunction()
