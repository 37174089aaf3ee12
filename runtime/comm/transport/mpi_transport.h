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
// done.
// - The spin window covers a peer a chunk behind and the skew between ranks
//   leaving a large collective: sleeping costs more than its length on VMs
//   (an idle vCPU is parked and resumed elsewhere), and a collective right
//   after a sleep ran slower.
// - Then sleeps of growing length up to a cap: while a peer is late the
//   waiting process uses little CPU, at the price of starting up to one cap
//   after a peer that was already late arrives.
// - yield: when a node runs more ranks than it has cores (tests and
//   benchmarks), the peer a rank waits for is often descheduled behind it on
//   the same core: pure spinning then holds it off for the whole window, and
//   spinning with sched_yield lets it run at once. Off otherwise: yielding
//   to the rank's own compute thread can delay the engine by a scheduler
//   tick. (Open MPI does the same: it yields while idle when oversubscribed.)
// The figures behind each choice: docs/BENCHMARKS.md, "Where the communicator's defaults come from".
// The largest message Open MPI's TCP transport sends at once (its 64 KiB
// btl_tcp_eager_limit, the match header included; a multiple of 64 below
// it): a larger one waits for a rendezvous, one more round trip. Where no
// two ranks of a communicator share a node, its one-shot messages and ring
// chunks are at most this.
constexpr int64_t kTcpEagerBytes = (64 << 10) - 64;

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

// How many ranks of `comm` share this rank's node (MPI_COMM_TYPE_SHARED: the
// MPI library's view of nodes). Collective over comm.
int ranks_on_this_node(MPI_Comm comm);

// MPI_Wait that gives the core back: polls MPI_Test with a Backoff. A
// blocking MPI wait spins at full speed; on a node whose ranks and threads
// outnumber its cores, the spinning thread takes the core from the very
// ranks it waits for (and from the kernel's own work). Returns MPI_Test's
// error code, or MPI_SUCCESS once complete.
int wait_backing_off(MPI_Request& request, const BackoffPolicy& policy = {});

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
