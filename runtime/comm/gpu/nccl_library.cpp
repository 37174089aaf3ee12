#include "runtime/comm/gpu/nccl_library.h"

#include "runtime/core/error.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

namespace shardtrain::comm {
namespace {

constexpr const char* kSoname = "libnccl.so.2";

struct Loaded {
  NcclLibrary lib;
  std::string error;  // empty when loaded
};

template <class F>
bool resolve(void* handle, const char* name, F& fn, std::string& error, bool required = true) {
  dlerror();
  void* sym = dlsym(handle, name);
  if (!sym) {
    if (required && error.empty()) {
      const char* why = dlerror();
      error = fmt::format("NCCL ({}) lacks {}: {} (NCCL >= 2.10 is needed)", kSoname, name, why ? why : "?");
    }
    return false;
  }
  fn = reinterpret_cast<F>(sym);
  return true;
}

Loaded load() {
  Loaded out;
  void* handle = dlopen(kSoname, RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    const char* why = dlerror();
    out.error = fmt::format(
        "NCCL ({}) not found: {}; install it (PyTorch's pip package ships it in "
        "site-packages/nvidia/nccl/lib) and set LD_LIBRARY_PATH to its folder",
        kSoname, why ? why : "dlopen failed");
    return out;
  }
  NcclLibrary& l = out.lib;
  std::string& e = out.error;
  resolve(handle, "ncclGetVersion", l.GetVersion, e);
  resolve(handle, "ncclGetUniqueId", l.GetUniqueId, e);
  resolve(handle, "ncclCommInitRank", l.CommInitRank, e);
  resolve(handle, "ncclCommDestroy", l.CommDestroy, e);
  resolve(handle, "ncclCommAbort", l.CommAbort, e);
  resolve(handle, "ncclCommGetAsyncError", l.CommGetAsyncError, e);
  resolve(handle, "ncclAllReduce", l.AllReduce, e);
  resolve(handle, "ncclReduceScatter", l.ReduceScatter, e);
  resolve(handle, "ncclAllGather", l.AllGather, e);
  resolve(handle, "ncclBroadcast", l.Broadcast, e);
  resolve(handle, "ncclGroupStart", l.GroupStart, e);
  resolve(handle, "ncclGroupEnd", l.GroupEnd, e);
  resolve(handle, "ncclGetErrorString", l.GetErrorString, e);
  resolve(handle, "ncclCommSplit", l.CommSplit, e, /*required=*/false);
  if (!e.empty()) return out;
  if (l.GetVersion(&l.version) != ncclSuccess) l.version = 0;
  Dl_info info{};
  l.path = dladdr(reinterpret_cast<void*>(l.GetVersion), &info) && info.dli_fname ? info.dli_fname : kSoname;
  // The handle stays open for the life of the process.
  return out;
}

const Loaded& loaded() {
  static const Loaded l = load();  // thread-safe initialization
  return l;
}

}  // namespace

std::string NcclLibrary::version_string() const {
  // NCCL_VERSION(X,Y,Z): X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z since 2.9.
  const int v = version;
  if (v >= 10000) return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
  return fmt::format("{}.{}.{}", v / 1000, (v / 100) % 10, v % 100);
}

const NcclLibrary& nccl() {
  const Loaded& l = loaded();
  ST_CHECK(l.error.empty(), "{}", l.error);
  return l.lib;
}

bool nccl_available(std::string* why) {
  const Loaded& l = loaded();
  if (why) *why = l.error;
  return l.error.empty();
}

void throw_nccl_error(ncclResult_t result, const char* what, const char* file, int line) {
  const Loaded& l = loaded();
  const char* reason = l.error.empty() && l.lib.GetErrorString ? l.lib.GetErrorString(result) : "?";
  throw Error(fmt::format("{}: NCCL error {} ({}) at {}:{}", what, int(result), reason, file, line));
}

}  // namespace shardtrain::comm
