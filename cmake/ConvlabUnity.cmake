# Unity builds for the host-only targets: each compiles its C++ files as a few combined files,
# so the headers most of them include (nlohmann/json, CLI11, cpp-httplib, the standard library)
# are parsed once per batch instead of once per file. Off for code a team writes or a test
# holds (their errors name their own files, their helpers may share names), for any target
# with CUDA sources (kernels in anonymous namespaces would collide), and for files the grader
# reads by object name (SKIP_UNITY_BUILD_INCLUSION where they are listed).
option(CONVLAB_UNITY_BUILD "Compile host-only targets as combined files (faster full builds)" ON)

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
    set_target_properties(${t} PROPERTIES UNITY_BUILD ON)
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
