#include "runtime/train/info.h"

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"
#include "kernels/devices.h"
#include "runtime/comm/transport/mpi_env.h"
#include "runtime/train/blas_core.h"

#include <cblas.h>
#include <fmt/format.h>
#include <hdf5.h>

namespace shardtrain::train {

std::string build_info() {
  std::string s = fmt::format("shardtrain 0.1.0 ({} build)\n",
#ifdef NDEBUG
                              "release"
#else
                              "debug"
#endif
  );
  std::string blas = OPENBLAS_VERSION;  // " OpenBLAS 0.3.21 "
  blas = blas.substr(blas.find_first_not_of(' '));
  blas = blas.substr(0, blas.find_last_not_of(' ') + 1);
  s += fmt::format("  BLAS      {}, core {}, {} thread(s) per rank\n", blas, cpu::blas_core(), cpu::blas_threads());
  if (const std::string note = blas_core_note(); !note.empty()) s += "            " + note + "\n";
  s += fmt::format("  oneDNN    {}\n", cpu::onednn_version());
  s += fmt::format("  CPU       {} (runtime.cpu_backend = auto)\n", cpu::cpu_backend_summary());
  s += fmt::format("  MPI       {}\n", comm::MpiEnv::library_version());
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
#ifdef H5_HAVE_PARALLEL
  const char* parallel = "parallel (MPI-IO)";
#else
  const char* parallel = "serial";
#endif
  s += fmt::format("  HDF5      {}.{}.{} {}\n", maj, min, rel, parallel);
  std::string why;
  auto devices = cuda_devices(&why);
  s += fmt::format("  CUDA      backend {}", cuda_backend_built() ? "built" : "not built");
  if (devices.empty())
    s += fmt::format("; no device ({})\n", why);
  else
    s += "\n";
  for (const auto& d : devices)
    s += fmt::format("    cuda:{} {} (sm {}), {:.1f} GiB\n", d.index, d.name, d.compute_capability,
                     double(d.total_memory_bytes) / (1 << 30));
  return s;
}

}  // namespace shardtrain::train
