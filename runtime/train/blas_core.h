// The OpenBLAS kernel set this process runs (kernels/cpu/gemm.h,
// suggested_blas_core): OpenBLAS picks it when the library loads and, on a
// CPU it does not recognize, falls back to generic SSE3 kernels, several
// times slower. OPENBLAS_CORETYPE fixes that only before the library loads,
// so `shardtrain` starts again with it set.
#pragma once

#include <string>

namespace shardtrain::train {

// With OPENBLAS_CORETYPE unset and a suggested core, sets it (and notes the
// library's own choice) and replaces the process with itself: once, since
// the variable is set then. Call first thing in main, before MPI_Init: under
// mpirun every rank does it on its own, as the same process (exec keeps the
// PID). Set OPENBLAS_CORETYPE to any value to keep the library's choice
// (also under gdb or valgrind, which would otherwise see the process
// replace itself). Returns only when there is nothing to do or exec failed.
void restart_with_a_better_blas_core(char** argv);

// One line for the run log and `shardtrain info`, or empty: that the process
// restarted with a better core, or (exec failed) which variable to set.
std::string blas_core_note();

}  // namespace shardtrain::train
