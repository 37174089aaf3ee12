// Open MPI's collectives on two communicators of one process at once, as
// HYBRID runs them: each rank all-reduces across the nodes (the ranks with
// its node-local index) while, with --beside, a second thread all-gathers
// inside the node. The all-reduce is the blocking call, or with --polled the
// non-blocking one completed by MPI_Test and sched_yield. Prints each rank's
// mean and worst all-reduce time. Plain MPI, no shardtrain: what the MPI
// library does on its own (scripts/bench-mpi-groups.sh builds and runs it).
//   groups_at_once RANKS_PER_NODE BYTES ITERS [--beside] [--polled]
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (argc < 4 || provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(
        stderr, "usage: groups_at_once RANKS_PER_NODE BYTES ITERS [--beside] [--polled] (needs MPI_THREAD_MULTIPLE)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int per_node = std::atoi(argv[1]), count = std::atoi(argv[2]) / 4, iters = std::atoi(argv[3]);
  bool beside = false, polled = false;
  for (int i = 4; i < argc; ++i) {
    beside = beside || std::strcmp(argv[i], "--beside") == 0;
    polled = polled || std::strcmp(argv[i], "--polled") == 0;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm node, across;
  MPI_Comm_split(MPI_COMM_WORLD, rank / per_node, rank, &node);
  MPI_Comm_split(MPI_COMM_WORLD, rank % per_node, rank, &across);

  std::thread inside;
  if (beside)
    inside = std::thread([&] {
      std::vector<float> mine(1024), all(1024 * size_t(per_node));
      for (int i = 0; i < iters; ++i) {
        usleep(2000);
        MPI_Allgather(mine.data(), 1024, MPI_FLOAT, all.data(), 1024, MPI_FLOAT, node);
      }
    });
  std::vector<float> buf(static_cast<size_t>(count));
  double sum = 0, worst = 0;
  for (int i = 0; i < iters; ++i) {
    usleep(2000);
    const double t0 = MPI_Wtime();
    if (polled) {
      MPI_Request request;
      MPI_Iallreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, across, &request);
      for (int done = 0; !done;) {
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (!done) sched_yield();
      }
    } else {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, across);
    }
    const double t = MPI_Wtime() - t0;
    sum += t;
    worst = std::max(worst, t);
  }
  if (inside.joinable()) inside.join();
  std::printf("rank %d: all-reduce of %d bytes across nodes%s%s: mean %.3f ms, worst %.1f ms\n", rank, count * 4,
              beside ? ", beside an all-gather in the node" : ", alone", polled ? ", polled" : ", blocking",
              sum / iters * 1e3, worst * 1e3);
  MPI_Comm_free(&node);
  MPI_Comm_free(&across);
  MPI_Finalize();
  return 0;
}
