#include "runtime/train/blas_core.h"

#include "kernels/cpu/gemm.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace shardtrain::train {
namespace {
// The core OpenBLAS chose before the restart.
constexpr const char* kRestartedFrom = "SHARDTRAIN_BLAS_RESTARTED";
}  // namespace

void restart_with_a_better_blas_core(char** argv) {
  const std::string core = cpu::suggested_blas_core();
  if (core.empty()) return;
  setenv(kRestartedFrom, cpu::blas_core().c_str(), 1);
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  // By the binary's own path: exec'd as /proc/self/exe, the process would be
  // named "exe" (what ps, pgrep and a scheduler's process tracking show).
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  execv(!ec && access(self.c_str(), X_OK) == 0 ? self.c_str() : "/proc/self/exe", argv);
  // exec failed: go on with the slow kernels; blas_core_note() warns.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kRestartedFrom);
}

std::string blas_core_note() {
  if (const char* chose = std::getenv(kRestartedFrom))
    return fmt::format(
        "OpenBLAS chose its {} kernels (it does not recognize this CPU); restarted with "
        "OPENBLAS_CORETYPE={} (set OPENBLAS_CORETYPE yourself to choose)",
        chose, cpu::blas_core());
  if (const std::string w = cpu::blas_core_warning(); !w.empty()) return "warning: " + w;
  return {};
}

}  // namespace shardtrain::train
