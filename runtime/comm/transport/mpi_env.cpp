#include "runtime/comm/transport/mpi_env.h"

#include "runtime/core/error.h"

#include <mpi.h>

#include <csignal>
#include <cstdlib>

namespace shardtrain::comm {

MpiEnv::MpiEnv(int* argc, char*** argv) {
  // Open MPI's MPI-IO (OMPIO) opens a shared-file-pointer component at
  // every collective open, though HDF5 never uses shared file pointers. The
  // defaults cost more than nothing: "lockedfile" (ranks on several nodes)
  // has rank 0 create and write a lock file beside the data file, then
  // waits for every rank in a barrier; on a node-local disk the others have
  // no such file and the open hangs, and on a full disk rank 0's write
  // fails before the barrier and the open hangs too. "individual" selects
  // nothing for a read-only open, so the loader's opens make no file and
  // no collective, and for a writable one (a checkpoint) makes two empty
  // files per rank beside it, removed when the file closes (and by the
  // checkpoint's failure path when it does not). So it is set for every
  // job; the user's own setting wins. docs/reliability.md has the runs.
  ::setenv("OMPI_MCA_sharedfp", "individual", /*overwrite=*/0);
  // Open MPI's TCP transport writes to its sockets without MSG_NOSIGNAL:
  // when a rank on another node dies (kill -9, the OOM killer), a rank
  // that was sending to it is killed by SIGPIPE, and mpirun, which names
  // only the first rank to end abnormally, may then blame that innocent
  // rank ("signal 13") instead of the one that died. Ignored, the write
  // fails with EPIPE, the transport reports the lost peer, and the rank
  // ends on that error while the dead rank's own signal is what mpirun
  // reports.
  std::signal(SIGPIPE, SIG_IGN);
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  ST_CHECK(provided >= MPI_THREAD_SERIALIZED,
           "the MPI library provides thread level {}, shardtrain needs at least MPI_THREAD_SERIALIZED", provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank_);
  MPI_Comm_size(local, &local_size_);
  MPI_Comm_free(&local);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  processor_name_.assign(name, size_t(len));
}

MpiEnv::~MpiEnv() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string MpiEnv::broadcast_string(const std::string& value, int root) const {
  auto length = int64_t(value.size());
  MPI_Bcast(&length, 1, MPI_INT64_T, root, MPI_COMM_WORLD);
  std::string out = rank_ == root ? value : std::string(size_t(length), '\0');
  MPI_Bcast(out.data(), int(length), MPI_CHAR, root, MPI_COMM_WORLD);
  return out;
}

void MpiEnv::abort(int code) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

std::string MpiEnv::library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, size_t(len));
  while (!v.empty() && (v.back() == '\n' || v.back() == '\0')) v.pop_back();
  return v.substr(0, v.find(','));
}

}  // namespace shardtrain::comm
