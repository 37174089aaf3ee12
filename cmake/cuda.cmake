# The CUDA backend builds whenever nvcc is found (SHARDTRAIN_CUDA=AUTO), so CI
# compiles it although it has no GPU. Device code targets sm_80 (A100) and
# sm_90 (H100/H200), unless CMAKE_CUDA_ARCHITECTURES says otherwise.
# SHARDTRAIN_CUDA_COMPILE_CHECK: sm_90 only, half the device compile, for a
# build whose device code no GPU will run (scripts/test.sh where none is
# present); scripts/build.sh turns it off again for a build to run.
option(SHARDTRAIN_CUDA_COMPILE_CHECK "device code for sm_90 only: a compile check where no GPU runs it" OFF)
set(SHARDTRAIN_HAVE_CUDA OFF)
if(NOT SHARDTRAIN_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND SHARDTRAIN_CUDA_COMPILE_CHECK)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    elseif(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    # CUDA sources include the runtime's C++20 headers (Tensor uses std::span,
    # Device a defaulted operator==). CMake 3.25 does not know nvcc 13's C++20
    # dialect flag, so it is told here.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # nvcc's front end rejects fmt's consteval format strings, so .cu files
    # (kernels only) include no fmt-based header: kernels/cuda/context.h
    # offers cuda::fail() for their errors; host-side code is in .cpp files.
    find_package(CUDAToolkit REQUIRED)
    set(SHARDTRAIN_HAVE_CUDA ON)
    include(${CMAKE_CURRENT_LIST_DIR}/cudnn_frontend.cmake)
    set(check "")
    if(SHARDTRAIN_CUDA_COMPILE_CHECK)
      set(check "; SHARDTRAIN_CUDA_COMPILE_CHECK: a compile check, no sm_80")
    endif()
    message(STATUS "shardtrain: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES}${check})")
  elseif(SHARDTRAIN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SHARDTRAIN_CUDA=ON but no nvcc was found (looked on PATH and in /usr/local/cuda/bin)")
  else()
    message(STATUS "shardtrain: CUDA backend OFF (no nvcc found)")
  endif()
else()
  message(STATUS "shardtrain: CUDA backend OFF (SHARDTRAIN_CUDA=OFF)")
endif()
