// Parallel HDF5 plumbing: file access over MPI-IO on a communicator, the
// transfer mode of reads (collective or independent), and what HDF5 says it
// actually did: a collective read can silently fall back to independent I/O
// (a datatype conversion, a selection the library cannot handle), and the
// report names the cause instead of leaving the user guessing.
#pragma once

#include "io/loader_options.h"

#include "io/hdf5_handle.h"

#include <mpi.h>

#include <string>

namespace shardtrain::io::mpio {

// File access properties: the MPI-IO driver on `comm` (opens are collective
// over it).
h5::PropList file_access(MPI_Comm comm);
// Transfer properties: "collective" or "independent" (H5Pset_dxpl_mpio).
h5::PropList transfer(Transfer mode);

// After a read with `dxpl`: the mode HDF5 actually used ("independent",
// "collective", "chunk-collective", "chunk-independent", "chunk-mixed",
// "contiguous-collective"), and for a collective request that was not
// carried out collectively, why ("" when it was, or when independent I/O was
// asked for).
std::string actual_io_mode(hid_t dxpl);
std::string no_collective_cause(hid_t dxpl);

}  // namespace shardtrain::io::mpio
