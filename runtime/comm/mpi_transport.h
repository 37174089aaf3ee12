// Point-to-point transport over one MPI communicator: the only thing the ring
// algorithms use. Post a send or a receive, then test it or wait for it.
//
// Waiting never blocks inside MPI: it polls MPI_Test with a Backoff (spin for
// a few microseconds, then sleep in growing steps). A progress thread waiting
// for a late peer thus gives its core back to the training compute thread
// (these machines have 2 cores for 2 ranks), at a cost of a few microseconds
// of latency once a wait outlasts the spin. Numbers behind the defaults: see
// Backoff below.
//
// Messages are checked: a receive that gets another size than posted (the
// ranks issued different collectives or sizes) throws, and so does any MPI
// error (the communicator's error handler is MPI_ERRORS_RETURN).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>
#include <string>

namespace shardtrain::comm {

// Spin, then sleep: what a polling loop does between polls that found nothing
// done. Measured on these VMs (2 vCPUs, 2 ranks):
// - nanosleep(1 us) sleeps ~15 us once the thread's timer slack is 1 us (~80
//   us with Linux's default 50 us, which is why the engine lowers it); an
//   MPI_Test costs ~0.1-0.2 us.
// - The spin window covers a peer a chunk behind (a 256 KiB chunk moves in
//   ~20-50 us) and the skew between ranks leaving a large collective (~100
//   us). Ring bandwidth was the same with 5 to 200 us; but sleeping costs
//   more than its length on these VMs: a 64 MiB MPI_Allgather right after an
//   ArrivalBarrier that had slept once ran 30% slower (the idle vCPU seems
//   to be parked and resumed elsewhere), with a 200 us window it did not.
// - Then sleeps of 1, 2, 4 ... up to 256 us. While a peer is 300 ms late the
//   waiting process used 95 ms of CPU with a 32 us cap, 34 ms with 128, 20 ms
//   (6%) with 256, 6 ms with 1000; bandwidth was the same with 32 and 256 (4
//   ranks on 2 cores did better with fewer wake-ups). The cost: a collective
//   whose peer was already late by ~0.5 ms or more may start up to 256 us
//   after the peer arrives.
// - yield: when a node runs more ranks than it has cores (4 ranks on these 2
//   cores, tests and benchmarks), the peer a rank waits for is often
//   descheduled behind it on the same core: pure spinning then holds it off
//   for the whole spin window. Spinning with sched_yield lets it run at once
//   (4 ranks, shared-memory all-reduce: 0.12-0.5x of MPI's speed without,
//   2-11x with). Off otherwise: yielding to the rank's own compute thread
//   can delay the engine's reaction by a scheduler tick, and 2 ranks were
//   slower with it (4 KiB all-reduces one at a time: 1.9 -> 5.8 us). (Open
//   MPI does the same: it yields while idle when oversubscribed.)
struct BackoffPolicy {
  double spin_s = 200e-6;
  double sleep_min_s = 1e-6;
  double sleep_max_s = 256e-6;
  bool yield = false;

  // The policy for the ranks of `world` on this node: `yield` when they
  // outnumber the cores this process may run on. Collective over `world`.
  static BackoffPolicy for_node(MPI_Comm world);
};

class Backoff {
 public:
  explicit Backoff(const BackoffPolicy& policy) : policy_(policy) {}
  // Called after a poll that found nothing done: spins while within the spin
  // window, else sleeps (longer each time).
  void idle();
  // Called after progress: the next wait starts spinning again.
  void reset() {
    spin_start_ = -1;
    sleep_s_ = policy_.sleep_min_s;
  }

 private:
  BackoffPolicy policy_;
  double spin_start_ = -1;
  double sleep_s_ = policy_.sleep_min_s;
};

// "MPI_ERR_TRUNCATE: message truncated" for an MPI error code.
std::string mpi_error_string(int code);
// Throws an Error naming `what` when rc is not MPI_SUCCESS.
void check_mpi(int rc, const char* what);

class MpiTransport {
 public:
  class Request {
   public:
    bool pending() const { return req_ != MPI_REQUEST_NULL; }

   private:
    friend class MpiTransport;
    MPI_Request req_ = MPI_REQUEST_NULL;
    int64_t bytes_ = 0;
    int peer_ = -1;
    bool recv_ = false;
  };

  // `comm` stays owned by the caller; only one thread may use a transport.
  MpiTransport(MPI_Comm comm, const BackoffPolicy& policy);

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }
  const BackoffPolicy& policy() const { return policy_; }
  // Builds a tag from a collective's sequence number and a small code (the
  // operation and its phase), within the MPI library's MPI_TAG_UB: messages of
  // different collectives never match each other.
  int tag(int64_t seq, int code) const;

  // Zero-byte messages are not sent: both sides compute the same layout and
  // skip them alike.
  void isend(Request& r, const void* buf, int64_t bytes, int peer, int tag);
  void irecv(Request& r, void* buf, int64_t bytes, int peer, int tag);
  // True once complete (a request never posted is complete).
  bool test(Request& r);
  void wait(Request& r);
  void wait_all(std::span<Request> requests);

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  int64_t seq_mask_ = 0;
  BackoffPolicy policy_;
};

}  // namespace shardtrain::comm
