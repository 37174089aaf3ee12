#include "runtime/comm/transport/shm_window.h"

#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/core/error.h"

#include <new>

namespace shardtrain::comm {
namespace {

constexpr size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
constexpr uint64_t kSeqMask = (uint64_t(1) << 48) - 1;

}  // namespace

std::unique_ptr<ShmWindow> ShmWindow::create(MPI_Comm comm, size_t data_bytes) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Comm shared;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared), "MPI_Comm_split_type");
  int shared_size = 0;
  MPI_Comm_size(shared, &shared_size);
  MPI_Comm_free(&shared);
  int everyone = shared_size == size ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &everyone, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (!everyone || size < 2) return nullptr;

  std::unique_ptr<ShmWindow> w(new ShmWindow);
  w->rank_ = rank;
  w->size_ = size;
  w->data_bytes_ = data_bytes;
  const size_t control_bytes = round_up(sizeof(Control), 4096);
  // Each rank's region in its own pages (first touched by its owner: its
  // NUMA node), not one contiguous block.
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void* base = nullptr;
  // A page more: the library's regions start anywhere (8-byte aligned seen);
  // each rank's is used from its first page boundary, the same offset in
  // every process's mapping (mappings are page aligned).
  const int rc = MPI_Win_allocate_shared(MPI_Aint(4096 + control_bytes + round_up(data_bytes, 4096)), 1, info, comm,
                                         static_cast<void*>(&base), &w->win_);
  MPI_Info_free(&info);
  check_mpi(rc, "MPI_Win_allocate_shared (shared memory for the all-reduce)");
  w->controls_ = std::make_unique<Control*[]>(size_t(size));
  w->data_ = std::make_unique<std::byte*[]>(size_t(size));
  for (int r = 0; r < size; ++r) {
    MPI_Aint bytes = 0;
    int unit = 0;
    void* region = nullptr;
    check_mpi(MPI_Win_shared_query(w->win_, r, &bytes, &unit, static_cast<void*>(&region)), "MPI_Win_shared_query");
    auto* p = static_cast<std::byte*>(region) + (4096 - reinterpret_cast<uintptr_t>(region) % 4096) % 4096;
    w->controls_[size_t(r)] = r == rank ? new (p) Control : std::launder(reinterpret_cast<Control*>(p));
    w->data_[size_t(r)] = p + control_bytes;
  }
  // Every control block initialized before anyone reads one.
  check_mpi(MPI_Barrier(comm), "MPI_Barrier");
  return w;
}

ShmWindow::~ShmWindow() {
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
}

uint64_t ShmWindow::signature(int64_t seq, OpCode op, bool algorithm_shm) {
  return ((uint64_t(seq + 1) & kSeqMask) << 8) | (uint64_t(op) << 1) | (algorithm_shm ? 1 : 0);
}

void ShmWindow::wait_all(Counter Control::*counter, int64_t e, const BackoffPolicy& policy, int64_t seq,
                         uint64_t signature) const {
  Backoff backoff(policy);
  for (int r = 0; r < size_; ++r) {
    while ((control(r).*counter).value.load(std::memory_order_acquire) < e) {
      if (signature != 0) check_peers(seq, signature);
      backoff.idle();
    }
  }
}

void ShmWindow::check_peers(int64_t seq, uint64_t mine) const {
  for (int r = 0; r < size_; ++r) {
    const auto theirs = uint64_t(control(r).entered.value.load(std::memory_order_acquire));
    if (r == rank_ || (theirs >> 8) != (mine >> 8) || theirs == mine) continue;
    auto describe = [](uint64_t s) {
      return fmt::format("{}{}", op_name(OpCode((s >> 1) & 0x7f)), s & 1 ? "" : " (not in shared memory)");
    };
    throw Error(fmt::format("the ranks issued different collectives as #{}: rank {} runs {}, this rank {}", seq, r,
                            describe(theirs), describe(mine)));
  }
}

}  // namespace shardtrain::comm
