# Compiles through ccache where it is installed. Paths inside this tree are hashed relative to
# the build folder (base_dir is the tree's root), so that a copy of the tree built with the same
# settings at the same depth (the student kit, the grader's framework cache) reuses the objects
# of this one. A launcher set by the caller (-D or the environment) wins.
option(CONVLAB_CCACHE "Compile through ccache when it is installed" ON)
if(CONVLAB_CCACHE)
  find_program(CONVLAB_CCACHE_PROGRAM ccache)
  mark_as_advanced(CONVLAB_CCACHE_PROGRAM)
  if(CONVLAB_CCACHE_PROGRAM)
    set(_convlab_launcher env "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}" "${CONVLAB_CCACHE_PROGRAM}")
    foreach(lang CXX CUDA)
      if(NOT DEFINED CMAKE_${lang}_COMPILER_LAUNCHER AND "$ENV{CMAKE_${lang}_COMPILER_LAUNCHER}" STREQUAL "")
        set(CMAKE_${lang}_COMPILER_LAUNCHER ${_convlab_launcher})
      endif()
    endforeach()
  endif()
endif()
