// The process's MPI environment: initialized once per process (thread level
// MPI_THREAD_MULTIPLE, so that progress-engine threads may own communicators),
// finalized at exit. A program started without mpirun is a world of one rank
// (MPI singleton). Also tells the node-local rank, which picks a rank's GPU.
// It ignores SIGPIPE for the process: a peer's death is an error the
// transport reports, not a signal that ends this rank too.
#pragma once

#include <string>

namespace shardtrain::comm {

class MpiEnv {
 public:
  MpiEnv(int* argc, char*** argv);
  ~MpiEnv();
  MpiEnv(const MpiEnv&) = delete;
  MpiEnv& operator=(const MpiEnv&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  std::string processor_name() const { return processor_name_; }

  // root's `value` on every rank of MPI_COMM_WORLD (e.g. rank 0's choice of
  // the run directory's name).
  std::string broadcast_string(const std::string& value, int root) const;

  // Ends every rank of the job with `code`: the way out when one rank fails
  // and the others might otherwise wait in a collective forever.
  [[noreturn]] static void abort(int code);
  // The MPI library's version string (for `shardtrain info` and run logs).
  static std::string library_version();

 private:
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string processor_name_;
};

}  // namespace shardtrain::comm
