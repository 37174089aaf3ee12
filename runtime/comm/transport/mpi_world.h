// What every communicator backend over MPI needs around its lifetime: the
// world ranks of a communicator's members, and a shutdown that runs when
// MPI_Finalize starts. MPI_Finalize first deletes the attributes of
// MPI_COMM_SELF, calling their delete callbacks while MPI still works: that is
// where a world communicator that outlives MPI (a static, say) stops its
// threads and frees its communicators, before MPI goes away under them.
#pragma once

#include <mpi.h>

#include <functional>
#include <vector>

namespace shardtrain::comm {

// MPI_COMM_WORLD rank of each rank of `comm`, in `comm`'s order.
std::vector<int> world_ranks_of(MPI_Comm comm);

// `shutdown` runs when MPI_Finalize starts, newest registration first, unless
// cancelled before (the owner's destructor) with the same `owner`.
void shutdown_at_mpi_finalize(const void* owner, std::function<void()> shutdown);
void cancel_shutdown_at_mpi_finalize(const void* owner);

}  // namespace shardtrain::comm
