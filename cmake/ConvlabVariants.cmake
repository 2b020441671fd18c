# The variant declarations (reference/conv/variants.def), read once for every CMake file that
# needs them: the stub and solution source lists, the libraries the team's code links, the API
# docs. The C++ side includes the same file as an X-macro; nothing else lists variants.
#
# After include(ConvlabVariants):
#   CONVLAB_VARIANTS                    every id, in declaration (teaching) order
#   CONVLAB_VARIANT_<id>_<FIELD>        MILESTONE DEVICE STUDENT_FILE STAFF_FILE HANDOUT IDEA
#                                       PRECISION LIBRARIES INTERFACE (plain, workspace or host)
#                                       SWEEP (sweep or nosweep) FUSED (fused or unfused)
#   convlab_variant_files(<out> STUDENT|STAFF [DEVICE cpu|gpu])
#                                       the files, relative to student/ or reference/solutions/
#   convlab_variant_libraries(<out> [DEVICE cpu|gpu])
#                                       the libraries any variant may call (none omitted)
include_guard(GLOBAL)

set(CONVLAB_VARIANTS_FILE "${CMAKE_CURRENT_LIST_DIR}/../reference/conv/variants.def")
cmake_path(NORMAL_PATH CONVLAB_VARIANTS_FILE)
if(NOT CMAKE_SCRIPT_MODE_FILE)
  # An edited declaration reconfigures the build (in script mode, cmake -P, there is none).
  set_property(DIRECTORY "${CMAKE_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               "${CONVLAB_VARIANTS_FILE}")
endif()

# Two expressions: CMake's regular expressions hold at most nine groups.
set(_q "\"([^\"]*)\"")
set(_convlab_variant_head "^CONVLAB_VARIANT\\(([a-z][a-z0-9_]*), ([a-z0-9_]+), (cpu|gpu), (.*)$")
set(_convlab_variant_tail
    "^${_q}, ${_q}, ${_q}, ${_q}, (fp32|tf32|fp16), (none|cublas), (plain|workspace|host), (sweep|nosweep), (fused|unfused)\\)$")
set(CONVLAB_VARIANTS "")
file(STRINGS "${CONVLAB_VARIANTS_FILE}" _lines REGEX "^CONVLAB_VARIANT\\(")
foreach(_line IN LISTS _lines)
  set(_ok OFF)
  if(_line MATCHES "${_convlab_variant_head}")
    set(_id "${CMAKE_MATCH_1}")
    set(CONVLAB_VARIANT_${_id}_MILESTONE "${CMAKE_MATCH_2}")
    set(CONVLAB_VARIANT_${_id}_DEVICE "${CMAKE_MATCH_3}")
    if(CMAKE_MATCH_4 MATCHES "${_convlab_variant_tail}")
      set(_ok ON)
    endif()
  endif()
  if(NOT _ok)
    message(FATAL_ERROR "${CONVLAB_VARIANTS_FILE}: this declaration does not have the form its "
                        "header describes (one line; id, milestone, cpu|gpu, four quoted "
                        "strings, fp32|tf32|fp16, none|cublas, plain|workspace|host, sweep|nosweep, fused|unfused):\n  ${_line}")
  endif()
  list(FIND CONVLAB_VARIANTS "${_id}" _seen)  # not IN_LIST: cmake -P scripts run old policies
  if(NOT _seen EQUAL -1)
    message(FATAL_ERROR "${CONVLAB_VARIANTS_FILE}: variant ${_id} is declared twice")
  endif()
  list(APPEND CONVLAB_VARIANTS "${_id}")
  string(FIND "${_line}" ", workspace, sweep, " _workspace_sweep)  # not MATCHES: keeps CMAKE_MATCH_*
  if(NOT _workspace_sweep EQUAL -1)
    message(FATAL_ERROR "${CONVLAB_VARIANTS_FILE}: variant ${_id} cannot both take a workspace "
                        "and sweep (a sweep point is a plain launcher)")
  endif()
  string(FIND "${_line}" ", host, sweep, " _host_sweep)
  string(FIND "${_line}" ", host, nosweep, fused)" _host_fused)
  if(NOT _host_sweep EQUAL -1 OR NOT _host_fused EQUAL -1)
    message(FATAL_ERROR "${CONVLAB_VARIANTS_FILE}: variant ${_id} takes host memory: it can "
                        "neither sweep nor fuse (both are device-pointer launchers)")
  endif()
  set(_i 1)
  foreach(_field STUDENT_FILE STAFF_FILE HANDOUT IDEA PRECISION LIBRARIES INTERFACE SWEEP FUSED)
    set(CONVLAB_VARIANT_${_id}_${_field} "${CMAKE_MATCH_${_i}}")
    math(EXPR _i "${_i} + 1")
  endforeach()
  foreach(_pair "STUDENT_FILE;student/" "STAFF_FILE;reference/solutions/")
    list(GET _pair 0 _field)
    list(GET _pair 1 _prefix)
    string(FIND "${CONVLAB_VARIANT_${_id}_${_field}}" "${_prefix}" _at)
    if(NOT _at EQUAL 0)
      message(FATAL_ERROR "${CONVLAB_VARIANTS_FILE}: variant ${_id}'s ${_field} must lie under "
                          "${_prefix} (got ${CONVLAB_VARIANT_${_id}_${_field}})")
    endif()
  endforeach()
endforeach()
if(NOT CONVLAB_VARIANTS)
  message(FATAL_ERROR "${CONVLAB_VARIANTS_FILE} declares no variant")
endif()

function(convlab_variant_files out which)
  cmake_parse_arguments(A "" "DEVICE" "" ${ARGN})
  set(files "")
  foreach(id IN LISTS CONVLAB_VARIANTS)
    if(A_DEVICE AND NOT CONVLAB_VARIANT_${id}_DEVICE STREQUAL A_DEVICE)
      continue()
    endif()
    if(which STREQUAL "STUDENT")
      string(REGEX REPLACE "^student/" "" file "${CONVLAB_VARIANT_${id}_STUDENT_FILE}")
    else()
      string(REGEX REPLACE "^reference/solutions/" "" file "${CONVLAB_VARIANT_${id}_STAFF_FILE}")
    endif()
    list(APPEND files "${file}")
  endforeach()
  list(REMOVE_DUPLICATES files)
  set(${out} "${files}" PARENT_SCOPE)
endfunction()

function(convlab_variant_libraries out)
  cmake_parse_arguments(A "" "DEVICE" "" ${ARGN})
  set(libs "")
  foreach(id IN LISTS CONVLAB_VARIANTS)
    if(A_DEVICE AND NOT CONVLAB_VARIANT_${id}_DEVICE STREQUAL A_DEVICE)
      continue()
    endif()
    if(NOT CONVLAB_VARIANT_${id}_LIBRARIES STREQUAL "none")
      list(APPEND libs "${CONVLAB_VARIANT_${id}_LIBRARIES}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES libs)
  set(${out} "${libs}" PARENT_SCOPE)
endfunction()
