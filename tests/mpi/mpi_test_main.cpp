// gtest main for tests run under mpirun: MPI is initialized once for all
// tests, only rank 0 prints gtest's report, and the process fails when the
// test failed on any rank (so a failure on rank 2 fails the run).
#include "runtime/comm/transport/mpi_env.h"

#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  shardtrain::comm::MpiEnv mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (mpi.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed && mpi.rank() != 0) std::fprintf(stderr, "rank %d: tests failed\n", mpi.rank());
  return any_failed;
}
