// shardtrain's public interface: collectives of your own, on host tensors
// (and device tensors with a GPU backend).
//   shardtrain::comm::MpiEnv                 MPI's start and end (mpi_env.h)
//   shardtrain::comm::Communicator, CommOptions, Work   (communicator.h, work.h)
// Stable within a minor version (docs/install.md).
#pragma once

#include "runtime/comm/communicator.h"
#include "runtime/comm/transport/mpi_env.h"
#include "runtime/comm/work.h"
