# Nothing is downloaded at configure time: on Debian scripts/install-deps.sh
# installs every dependency; elsewhere docs/building.md says what to point
# CMake at.
# The libraries' own dependencies (cmake/shardtrain_find_dependencies.cmake,
# which find_package(shardtrain) uses too), then what the program, the tests
# and the benchmarks add.
include(${CMAKE_CURRENT_LIST_DIR}/shardtrain_find_dependencies.cmake)
# The C API only: keep mpi.h from pulling in the deprecated C++ bindings.
add_compile_definitions(OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
find_package(CLI11 REQUIRED)
if(SHARDTRAIN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(SHARDTRAIN_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
