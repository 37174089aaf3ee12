# Every dependency comes from a Debian package installed by
# scripts/install-deps.sh; nothing is downloaded at configure time.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS C)
# The C API only: keep mpi.h from pulling in the deprecated C++ bindings.
add_compile_definitions(OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)

# Parallel HDF5: the Open MPI build, found through its pkg-config file because
# CMake's FindHDF5 prefers the serial library when both are installed.
set(SHARDTRAIN_HDF5_PKG hdf5-openmpi)  # the installed package's config finds it by the same name
pkg_check_modules(HDF5 REQUIRED IMPORTED_TARGET ${SHARDTRAIN_HDF5_PKG})
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
# CRC-32 (zlib's polynomial) with carry-less multiplication: about 4x zlib's
# speed, for the checksums checked on every read (io/shard_format.cpp).
pkg_check_modules(LIBDEFLATE REQUIRED IMPORTED_TARGET libdeflate)

find_package(fmt REQUIRED)
find_package(tomlplusplus REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(ZLIB REQUIRED)
# The object-store source (io/s3/): HTTP(S) through libcurl, SigV4's SHA-256
# and HMAC from OpenSSL's libcrypto.
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
if(SHARDTRAIN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(SHARDTRAIN_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
