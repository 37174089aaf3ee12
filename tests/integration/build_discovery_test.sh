# The dependency discovery that the build and find_package(shardtrain)
# share (cmake/shardtrain_find_dependencies.cmake), on a project of its own:
# it finds everything here; without pkg-config's files it still finds
# OpenBLAS and libdeflate by their headers and libraries; and an HDF5 that
# cannot be found stops configuration with one message naming the piece and
# the variable to set.
source "$(dirname "$0")/lib.sh"
mkdir -p project
cat >project/CMakeLists.txt <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(discovery C CXX)
include("$SOURCE_DIR/cmake/shardtrain_find_dependencies.cmake")
foreach(t shardtrain_deps::hdf5 shardtrain_deps::openblas shardtrain_deps::libdeflate MPI::MPI_C)
  if(NOT TARGET \${t})
    message(FATAL_ERROR "no \${t}")
  endif()
endforeach()
message(STATUS "discovery: every dependency found")
CMAKE

cmake -S project -B found >found.txt 2>&1 || { cat found.txt; fail "discovery failed on this machine"; }
grep -q "every dependency found" found.txt || fail "no targets"
pass "every dependency found"

PKG_CONFIG_LIBDIR=/nonexistent PKG_CONFIG_PATH= cmake -S project -B no-pkg-config >no-pkg-config.txt 2>&1 ||
  { cat no-pkg-config.txt; fail "without pkg-config's files"; }
pass "without pkg-config's files: OpenBLAS and libdeflate found by header and library"

rc=0
cmake -S project -B no-hdf5 -DHDF5_ROOT=/nonexistent -DHDF5_C_COMPILER_EXECUTABLE=/nonexistent/h5pcc \
  >no-hdf5.txt 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "configuration went on without HDF5"
tr -s ' \n' ' ' <no-hdf5.txt | grep -q "shardtrain needs a parallel HDF5: none was found: set HDF5_ROOT to its prefix" ||
  { cat no-hdf5.txt; fail "the message does not name HDF5 and HDF5_ROOT"; }
pass "a missing HDF5 names itself and HDF5_ROOT"
