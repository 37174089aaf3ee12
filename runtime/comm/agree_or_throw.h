// One outcome on every rank for work that may fail on some ranks only (bad
// input, a file error): every rank calls it with its error ("" for none);
// if any rank failed, every rank throws the first failing rank's message,
// so that no rank goes on into a collective the failed ones never reach.
#pragma once

#include <mpi.h>

#include <string>

namespace shardtrain::comm {

// Collective over `comm`. Ranks other than the failing one get
// "<message> (on rank N)".
void agree_or_throw(MPI_Comm comm, const std::string& my_error);

}  // namespace shardtrain::comm
