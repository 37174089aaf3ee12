// MPI for a whole GPU test binary that runs as a world of one rank (an MPI
// singleton) unless started under mpirun: NCCL's unique id travels over it.
// gtest_main is the binary's main, so MPI comes up and goes down with this
// global test environment. `before_finalize` releases what must go before
// MPI_Finalize (a communicator kept across tests).
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <functional>
#include <utility>

namespace shardtrain::gpu_test {

class MpiEnvironment : public ::testing::Environment {
 public:
  explicit MpiEnvironment(std::function<void()> before_finalize = {}) : before_finalize_(std::move(before_finalize)) {}
  void SetUp() override {
    int initialized = 0, provided = 0;
    MPI_Initialized(&initialized);
    if (!initialized) MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  }
  void TearDown() override {
    if (before_finalize_) before_finalize_();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }

 private:
  std::function<void()> before_finalize_;
};

}  // namespace shardtrain::gpu_test
