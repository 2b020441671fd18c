# Unity builds for the host-only targets: each compiles its C++ files as a few combined files,
# so the headers most of them include (nlohmann/json, CLI11, cpp-httplib, the standard library)
# are parsed once per batch instead of once per file. Off for code a team writes (its errors
# name its own files, its helpers may share names), for the tests (convlab_test() combines each
# folder's, tests/CMakeLists.txt), for any target with CUDA sources (kernels in anonymous
# namespaces would collide), and for files the grader reads by object name
# (SKIP_UNITY_BUILD_INCLUSION where they are listed).
option(CONVLAB_UNITY_BUILD "Compile host-only targets as combined files (faster full builds)" ON)

# Compiles `target` as combined files. A combined file includes its sources by absolute path, so
# __FILE__ (CUDA_CHECK's messages, doctest's) is mapped to the path from the tree's root: a copy
# of the tree (the student kit) then compiles the same text, and ccache serves it.
function(convlab_combine target)
  if(CONVLAB_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=>)
  endif()
endfunction()

function(_convlab_unity_targets dir)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|SHARED_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(sources ${t} SOURCES)
    if(t MATCHES "student" OR sources MATCHES "\\.cu(;|$)")
      continue()
    endif()
    convlab_combine(${t})
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    if(NOT sub MATCHES "/tests(/|$)")
      _convlab_unity_targets("${sub}")
    endif()
  endforeach()
endfunction()

# Called once, at the end of the top-level CMakeLists.txt, when every target exists.
function(convlab_unity_build)
  if(CONVLAB_UNITY_BUILD)
    _convlab_unity_targets("${PROJECT_SOURCE_DIR}")
  endif()
endfunction()
