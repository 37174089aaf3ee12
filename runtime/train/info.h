// `shardtrain info`: what this build is and what this machine offers it.
#pragma once

#include <string>

namespace shardtrain::train {

// Version, build type, BLAS (core type, threads), MPI library, HDF5 (and
// whether it is the parallel build), CUDA backend and devices.
std::string build_info();

}  // namespace shardtrain::train
