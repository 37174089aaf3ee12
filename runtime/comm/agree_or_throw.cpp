#include "runtime/comm/agree_or_throw.h"

#include "runtime/core/error.h"

#include <climits>

namespace shardtrain::comm {

void agree_or_throw(MPI_Comm comm, const std::string& my_error) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const int mine = my_error.empty() ? INT_MAX : rank;
  int first = INT_MAX;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == INT_MAX) return;
  int len = first == rank ? int(my_error.size()) : 0;
  MPI_Bcast(&len, 1, MPI_INT, first, comm);
  std::string message = first == rank ? my_error : std::string(size_t(len), '\0');
  MPI_Bcast(message.data(), len, MPI_CHAR, first, comm);
  int same = MPI_UNEQUAL;
  MPI_Comm_compare(comm, MPI_COMM_WORLD, &same);
  const bool world = same == MPI_IDENT || same == MPI_CONGRUENT;
  if (first == rank) throw AgreedError(message, world);
  throw AgreedError(fmt::format("{} (on rank {})", message, first), world);
}

}  // namespace shardtrain::comm
