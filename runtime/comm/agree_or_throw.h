// One outcome on every rank for work that may fail on some ranks only (bad
// input, a file error): every rank calls it with its error ("" for none);
// if any rank failed, every rank throws the first failing rank's message,
// so that no rank goes on into a collective the failed ones never reach.
#pragma once

#include "runtime/core/error.h"

#include <mpi.h>

#include <string>

namespace shardtrain::comm {

// What agree_or_throw throws: an error every rank of the communicator raised
// at the same call. Those ranks are all at the same place, so they can still
// meet in a collective to end in order (rank 0 writes the run's result
// before any rank aborts the job).
class AgreedError : public Error {
 public:
  AgreedError(std::string message, bool whole_world) : Error(std::move(message)), whole_world_(whole_world) {}
  // Raised by every rank of MPI_COMM_WORLD (not a sub-communicator).
  bool whole_world() const { return whole_world_; }

 private:
  bool whole_world_;
};

// Collective over `comm`. Ranks other than the failing one get
// "<message> (on rank N)". Throws AgreedError.
void agree_or_throw(MPI_Comm comm, const std::string& my_error);

}  // namespace shardtrain::comm
