# CUDA toolkit, cuDNN and the GPU architectures to build for.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  # Build for the GPU in this machine when there is one. Without one nothing built here can run:
  # compile Hopper's PTX only (90a, the architecture with the most code paths), which checks
  # every kernel at half the nvcc time of machine code for two architectures.
  execute_process(COMMAND nvidia-smi --query-gpu=compute_cap --format=csv,noheader
                  OUTPUT_VARIABLE _convlab_cc RESULT_VARIABLE _convlab_smi ERROR_QUIET
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  # Hopper as 90a: its architecture-specific instructions (wgmma), which staff `best` uses on
  # sm_90 devices; a 90a binary runs on compute capability 9.0 only, as sm_90 code would.
  if(_convlab_smi EQUAL 0 AND _convlab_cc MATCHES "^([0-9]+)\\.([0-9]+)")
    set(CMAKE_CUDA_ARCHITECTURES "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
    if(CMAKE_CUDA_ARCHITECTURES STREQUAL "90")
      set(CMAKE_CUDA_ARCHITECTURES "90a")
    endif()
  else()
    set(CMAKE_CUDA_ARCHITECTURES "90a-virtual")
  endif()
endif()
# The usual toolkit location, unless CUDACXX or -DCMAKE_CUDA_COMPILER names another compiler.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND "$ENV{CUDACXX}" STREQUAL "" AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
enable_language(CUDA)
# CMake 3.25 predates nvcc 13 and does not know its C++20 flag: tell it.
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
find_package(CUDAToolkit REQUIRED)
find_package(CUDNN REQUIRED)
message(STATUS "convlab: CUDA ${CUDAToolkit_VERSION}, cuDNN ${CUDNN_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
