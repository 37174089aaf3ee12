#include "runtime/comm/transport/mpi_world.h"

#include "runtime/comm/transport/mpi_transport.h"

#include <algorithm>
#include <mutex>
#include <utility>

namespace shardtrain::comm {
namespace {

std::mutex g_mu;
std::vector<std::pair<const void*, std::function<void()>>> g_shutdowns;
int g_keyval = MPI_KEYVAL_INVALID;

int run_shutdowns(MPI_Comm, int, void*, void*) {
  std::vector<std::pair<const void*, std::function<void()>>> pending;
  {
    std::lock_guard lock(g_mu);
    pending = g_shutdowns;  // the shutdowns may cancel themselves
  }
  for (auto it = pending.rbegin(); it != pending.rend(); ++it) it->second();
  return MPI_SUCCESS;
}

}  // namespace

std::vector<int> world_ranks_of(MPI_Comm comm) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(static_cast<size_t>(size)), out(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) ranks[size_t(i)] = i;
  MPI_Group_translate_ranks(group, size, ranks.data(), world, out.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return out;
}

void shutdown_at_mpi_finalize(const void* owner, std::function<void()> shutdown) {
  std::lock_guard lock(g_mu);
  if (g_keyval == MPI_KEYVAL_INVALID) {
    check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &run_shutdowns, &g_keyval, nullptr),
              "MPI_Comm_create_keyval");
    check_mpi(MPI_Comm_set_attr(MPI_COMM_SELF, g_keyval, nullptr), "MPI_Comm_set_attr");
  }
  g_shutdowns.emplace_back(owner, std::move(shutdown));
}

void cancel_shutdown_at_mpi_finalize(const void* owner) {
  std::lock_guard lock(g_mu);
  std::erase_if(g_shutdowns, [owner](const auto& s) { return s.first == owner; });
}

}  // namespace shardtrain::comm
