#include "runtime/comm/transport/mpi_transport.h"

#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

#ifdef __linux__
#include <sched.h>
#endif

namespace shardtrain::comm {

void Backoff::idle() {
  const double now = now_seconds();
  if (spin_start_ < 0) spin_start_ = now;
  if (now - spin_start_ < policy_.spin_s) {  // poll again at once
    if (policy_.yield) std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s_));
  sleep_s_ = std::min(sleep_s_ * 2, policy_.sleep_max_s);
}

int ranks_on_this_node(MPI_Comm comm) {
  int rank = 0, local_ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  MPI_Comm_size(node, &local_ranks);
  MPI_Comm_free(&node);
  return local_ranks;
}

BackoffPolicy BackoffPolicy::for_node(MPI_Comm world) {
  const int local_ranks = ranks_on_this_node(world);
  int cores = int(std::thread::hardware_concurrency());
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
#endif
  BackoffPolicy policy;
  policy.yield = cores > 0 && local_ranks > cores;
  return policy;
}

int wait_backing_off(MPI_Request& request, const BackoffPolicy& policy) {
  Backoff backoff(policy);
  for (;;) {
    int done = 0;
    const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || done) return rc;
    backoff.idle();
  }
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, size_t(len));
}

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) [[unlikely]]
    throw Error(fmt::format("{}: {}", what, mpi_error_string(rc)));
}

MpiTransport::MpiTransport(MPI_Comm comm, const BackoffPolicy& policy) : comm_(comm), policy_(policy) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  void* value = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm_, MPI_TAG_UB, static_cast<void*>(&value), &found);
  const int64_t tag_ub = found ? *static_cast<int*>(value) : 32767;  // the standard's minimum
  // 4 bits of code below the sequence number; the sequence wraps (harmless:
  // collectives run one after the other, far fewer than 2^11 in flight).
  seq_mask_ = 1;
  while ((seq_mask_ << 1) * 16 <= tag_ub + 1) seq_mask_ <<= 1;
  seq_mask_ -= 1;
}

int MpiTransport::tag(int64_t seq, int code) const {
  ST_ASSERT(code >= 0 && code < 16);
  return int(((seq & seq_mask_) << 4) | code);
}

void MpiTransport::isend(Request& r, const void* buf, int64_t bytes, int peer, int tag) {
  ST_ASSERT(!r.pending() && bytes >= 0 && bytes <= INT_MAX);
  r.bytes_ = bytes;
  r.peer_ = peer;
  r.recv_ = false;
  if (bytes == 0) return;
  check_mpi(MPI_Isend(buf, int(bytes), MPI_BYTE, peer, tag, comm_, &r.req_), "MPI_Isend");
}

void MpiTransport::irecv(Request& r, void* buf, int64_t bytes, int peer, int tag) {
  ST_ASSERT(!r.pending() && bytes >= 0 && bytes <= INT_MAX);
  r.bytes_ = bytes;
  r.peer_ = peer;
  r.recv_ = true;
  if (bytes == 0) return;
  check_mpi(MPI_Irecv(buf, int(bytes), MPI_BYTE, peer, tag, comm_, &r.req_), "MPI_Irecv");
}

bool MpiTransport::test(Request& r) {
  if (!r.pending()) return true;
  int done = 0;
  MPI_Status status;
  const int rc = MPI_Test(&r.req_, &done, &status);
  if (rc != MPI_SUCCESS)
    throw Error(
        fmt::format("{} rank {}: {}", r.recv_ ? "receiving from" : "sending to", r.peer_, mpi_error_string(rc)));
  if (!done) return false;
  if (r.recv_) {
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count != r.bytes_)
      throw Error(
          fmt::format("rank {} sent {} bytes where {} were expected (the ranks issued "
                      "different collectives or sizes)",
                      r.peer_, count, r.bytes_));
  }
  return true;
}

void MpiTransport::wait(Request& r) {
  Backoff backoff(policy_);
  while (!test(r)) backoff.idle();
}

void MpiTransport::wait_all(std::span<Request> requests) {
  Backoff backoff(policy_);
  for (Request& r : requests) {
    while (!test(r)) backoff.idle();
    backoff.reset();
  }
}

}  // namespace shardtrain::comm
