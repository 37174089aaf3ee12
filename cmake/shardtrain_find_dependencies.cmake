# The libraries shardtrain's own code links against, found the same way by
# its build (cmake/dependencies.cmake) and by find_package(shardtrain) (this
# file is installed beside shardtrainConfig.cmake): CMake's own FindMPI,
# FindHDF5 and FindCUDAToolkit, pkg-config or a prefix for the rest, so a
# site's modules or Spack prefixes work as Debian's packages do. A missing
# piece stops configuration with a message naming it and the variable that
# points CMake at it (docs/building.md).
include_guard(GLOBAL)

function(shardtrain_missing what how)
  message(FATAL_ERROR "shardtrain needs ${what}: ${how} (docs/building.md)")
endfunction()

find_package(Threads REQUIRED)
find_package(PkgConfig QUIET)

find_package(MPI COMPONENTS C)
if(NOT MPI_C_FOUND)
  shardtrain_missing("an MPI library (Open MPI, MPICH, HPC-X, ...)"
                     "none was found: set MPI_HOME to its prefix, or put its mpicc on PATH (module load / spack load); Debian and Ubuntu: apt-get install libopenmpi-dev")
endif()

# Parallel HDF5 (MPI-IO: many ranks in one file), the parallel build
# preferred where a serial one is installed beside it (h5pcc before h5cc).
set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 COMPONENTS C)
if(NOT HDF5_FOUND)
  shardtrain_missing("a parallel HDF5"
                     "none was found: set HDF5_ROOT to its prefix (the folder holding bin/h5pcc); Debian and Ubuntu: libhdf5-openmpi-dev, RHEL-family: hdf5-openmpi-devel, Spack: hdf5+mpi")
elseif(NOT HDF5_IS_PARALLEL)
  shardtrain_missing("a parallel HDF5"
                     "the one found (${HDF5_C_INCLUDE_DIRS}) was built without MPI: set HDF5_ROOT to a parallel build's prefix")
endif()
if(NOT TARGET shardtrain_deps::hdf5)
  add_library(shardtrain_deps::hdf5 INTERFACE IMPORTED)
  set(_st_hdf5_defs "")
  foreach(_st_def IN LISTS HDF5_C_DEFINITIONS)
    string(REGEX REPLACE "^-D" "" _st_def "${_st_def}")
    list(APPEND _st_hdf5_defs "${_st_def}")
  endforeach()
  set_target_properties(shardtrain_deps::hdf5 PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${HDF5_C_INCLUDE_DIRS}"
    INTERFACE_COMPILE_DEFINITIONS "${_st_hdf5_defs}"
    INTERFACE_LINK_LIBRARIES "${HDF5_C_LIBRARIES};MPI::MPI_C")
endif()

# A library found by pkg-config's MODULE, else by its header and library
# under <PREFIX_VAR> (or the default paths): the interface target NAME.
function(shardtrain_find_library name module header library prefix_var what)
  if(TARGET ${name})
    return()
  endif()
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(_st_${module} QUIET IMPORTED_TARGET GLOBAL ${module})
  endif()
  add_library(${name} INTERFACE IMPORTED GLOBAL)
  if(TARGET PkgConfig::_st_${module})
    set_target_properties(${name} PROPERTIES INTERFACE_LINK_LIBRARIES PkgConfig::_st_${module})
    return()
  endif()
  find_path(_st_${module}_include ${header} HINTS ${${prefix_var}} $ENV{${prefix_var}}
            PATH_SUFFIXES include include/${module} ${module})
  find_library(_st_${module}_library ${library} HINTS ${${prefix_var}} $ENV{${prefix_var}} PATH_SUFFIXES lib lib64)
  if(NOT _st_${module}_include OR NOT _st_${module}_library)
    shardtrain_missing("${what}" "neither pkg-config (${module}.pc) nor ${header} and lib${library} were found: set ${prefix_var} to its prefix, or PKG_CONFIG_PATH to the folder of ${module}.pc")
  endif()
  set_target_properties(${name} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_st_${module}_include}"
                                           INTERFACE_LINK_LIBRARIES "${_st_${module}_library}")
endfunction()

shardtrain_find_library(shardtrain_deps::openblas openblas cblas.h openblas OpenBLAS_ROOT "OpenBLAS (its CBLAS interface)")
# oneDNN: direct convolutions in its blocked layouts, and matrix products on
# CPUs with bf16 kernels (kernels/cpu/cpu_backend.h). Debian ships no .pc file.
shardtrain_find_library(shardtrain_deps::onednn dnnl oneapi/dnnl/dnnl.hpp dnnl DNNL_ROOT "oneDNN (libdnnl)")
# CRC-32 (zlib's polynomial) with carry-less multiplication: about 4x zlib's
# speed, for the checksums checked on every read (io/shard_format.cpp).
shardtrain_find_library(shardtrain_deps::libdeflate libdeflate libdeflate.h deflate libdeflate_ROOT "libdeflate")

find_package(fmt REQUIRED)
find_package(tomlplusplus REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)
# The object-store source (io/s3/): HTTP(S) through libcurl, SigV4's SHA-256
# and HMAC from OpenSSL's libcrypto.
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
