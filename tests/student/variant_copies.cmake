# Every variant file links on its own when it starts as a copy of the first GPU variant (the
# baseline): that stub's skeleton (its kernel in an anonymous namespace) is copied into the file
# of every GPU variant of reference/conv/variants.def, each with its launcher, and all are compiled and
# linked into one program, as the student library does. Without the anonymous namespace the
# same copies must fail to link (so the test can tell). Needs nvcc, not a GPU.
#
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... -DNVCC=... -DCUDA_ARCH=... -P variant_copies.cmake
foreach(v SOURCE_DIR WORK_DIR NVCC CUDA_ARCH)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "variant_copies.cmake: -D${v}= is required")
  endif()
endforeach()

# Every GPU variant of the declarations: (id, file).
include("${SOURCE_DIR}/cmake/ConvlabVariants.cmake")
set(ids "")
foreach(id IN LISTS CONVLAB_VARIANTS)
  if(CONVLAB_VARIANT_${id}_DEVICE STREQUAL "gpu")
    list(APPEND ids "${id}")
    set(file_${id} "${CONVLAB_VARIANT_${id}_STUDENT_FILE}")
  endif()
endforeach()
list(LENGTH ids count)
if(count LESS 2)
  message(FATAL_ERROR "found ${count} GPU variants in variants.def; expected several")
endif()
list(GET ids 0 first)

# The skeleton, from the comment of the first stub: "// namespace {" to "// }  // namespace".
file(STRINGS "${SOURCE_DIR}/${file_${first}}" stub)
set(skeleton "")
set(inside OFF)
foreach(line IN LISTS stub)
  if(line STREQUAL "// namespace {")
    set(inside ON)
  endif()
  if(inside)
    string(REGEX REPLACE "^// ?" "" code "${line}")
    string(APPEND skeleton "${code}\n")
  endif()
  if(line STREQUAL "// }  // namespace")
    set(inside OFF)
  endif()
endforeach()
if(NOT skeleton MATCHES "namespace \\{" OR NOT skeleton MATCHES "__global__ void conv_forward_kernel")
  # The team has written its baseline over the stub: the skeleton this test copies is gone.
  message("SKIPPED: ${file_${first}} no longer holds the stub's commented skeleton "
          "(// namespace { ... // }  // namespace): your baseline is written, nothing to copy")
  return()
endif()

# Through ccache where it is installed, with base_dir at the tree's root: a copy of the tree (the
# student kit) compiles the same copies from the cache.
find_program(CCACHE ccache)
set(compile "${NVCC}")
if(CCACHE)
  set(compile env "CCACHE_BASEDIR=${SOURCE_DIR}" "${CCACHE}" "${NVCC}")
endif()

# PTX only: what is tested is the host link, and ptxas would double the time.
set(arch_flags "--generate-code=arch=compute_${CUDA_ARCH},code=compute_${CUDA_ARCH}")
cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)

# Builds one copy per variant of `variants` with `kernel_code`, `cores` compiles at a time (the
# commands of one execute_process run side by side); the link's result goes to `result`.
function(build_copies tag variants kernel_code result)
  set(dir "${WORK_DIR}/${tag}")
  file(REMOVE_RECURSE "${dir}")
  set(objects "")
  set(calls "")
  set(batch "")
  set(batch_files "")
  list(LENGTH variants left)
  foreach(id IN LISTS variants)
    get_filename_component(name "${file_${id}}" NAME_WE)
    set(src "${dir}/${file_${id}}")
    file(WRITE "${src}" "#include \"reference/conv/student_api.hpp\"\n\n"
      "namespace convlab::student {\n${kernel_code}\n"
      "void conv_${id}(float* y, const float* x, const float* k, const ConvShape& s,\n"
      "               cudaStream_t stream) {\n"
      "  conv_forward_kernel<<<1, 1, 0, stream>>>(y, x, k, s.B, s.M, s.C, s.H, s.W, s.K);\n"
      "}\n}  // namespace convlab::student\n")
    list(APPEND batch COMMAND ${compile} -std=c++20 ${arch_flags} -DCONVLAB_HAVE_CUDA=1
                      -I "${SOURCE_DIR}" -c "${src}" -o "${dir}/${name}.o")
    list(APPEND batch_files "${file_${id}}")
    list(APPEND objects "${dir}/${name}.o")
    string(APPEND calls "  (void)&convlab::student::conv_${id};\n")
    math(EXPR left "${left} - 1")
    list(LENGTH batch_files size)
    if(size EQUAL cores OR left EQUAL 0)
      execute_process(${batch} WORKING_DIRECTORY "${dir}" RESULTS_VARIABLE codes
                      OUTPUT_VARIABLE out ERROR_VARIABLE out)
      foreach(code file IN ZIP_LISTS codes batch_files)
        if(NOT code EQUAL 0)
          message(FATAL_ERROR "${file}, a copy of the first stub's skeleton, does not compile:\n${out}")
        endif()
      endforeach()
      set(batch "")
      set(batch_files "")
    endif()
  endforeach()
  file(WRITE "${dir}/main.cu" "#include \"reference/conv/student_api.hpp\"\nint main() {\n${calls}}\n")
  execute_process(COMMAND "${NVCC}" -std=c++20 ${arch_flags} -DCONVLAB_HAVE_CUDA=1
                          -I "${SOURCE_DIR}" "${dir}/main.cu" ${objects} -o "${dir}/program"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  set(${result} "${rc}" PARENT_SCOPE)
  set(${result}_log "${out}" PARENT_SCOPE)
endfunction()

build_copies(anonymous "${ids}" "${skeleton}" linked)
if(NOT linked EQUAL 0)
  message(FATAL_ERROR "the ${count} variant files, each a copy of the first stub's skeleton, do not "
                      "link together:\n${linked_log}")
endif()
message(STATUS "${count} variant files, each a copy of the first stub's skeleton, link together: ${ids}")

# The control: the same kernel outside an anonymous namespace is defined twice (two variants
# are enough to show it).
string(REPLACE "namespace {\n" "" named "${skeleton}")
string(REPLACE "}  // namespace\n" "" named "${named}")
list(SUBLIST ids 0 2 two)
build_copies(named "${two}" "${named}" named_linked)
if(named_linked EQUAL 0)
  message(FATAL_ERROR "copies whose kernel is not in an anonymous namespace linked: this test "
                      "cannot tell the difference")
endif()
message(STATUS "without the anonymous namespace they do not link, as expected")
