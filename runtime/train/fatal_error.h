// How a rank's error ends the program: one line on stderr naming the rank,
// the flight recorder's dump, and, in a job of several ranks, MPI_Abort of the
// whole job. A multi-rank job must abort *before* unwinding: the destructors
// of the communicator (a shared-memory window) and of the streaming loader
// (parallel HDF5 files) are collective, and would wait for ranks that are
// busy elsewhere, hiding the error behind the watchdog's timeout.
#pragma once

#include <exception>

namespace shardtrain::train {

// The one line: "shardtrain: error (rank R): <what>" on stderr.
void say_fatal_error(const std::exception& e, int rank, int world);
// Says it (unless `say` is false: another rank has said it) and dumps;
// aborts the job when world > 1 (does not return then).
void report_fatal_error(const std::exception& e, int rank, int world, bool say = true);

}  // namespace shardtrain::train
