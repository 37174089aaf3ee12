#include "runtime/comm/gpu/nccl_library.h"

#include "runtime/core/error.h"
#include "runtime/core/shared_library.h"

#include <fmt/format.h>

#include <mutex>

namespace shardtrain::comm {
namespace {

constexpr const char* kSoname = "libnccl.so.2";

struct Loaded {
  NcclLibrary lib;
  std::string error;  // empty when loaded
};

Loaded load() {
  Loaded out;
  SharedLibrary so({kSoname});
  if (!so.loaded()) {
    out.error = fmt::format(
        "NCCL ({}) not found: {}; install it (PyTorch's pip package ships it in "
        "site-packages/nvidia/nccl/lib) and set LD_LIBRARY_PATH to its folder",
        kSoname, so.error());
    return out;
  }
  NcclLibrary& l = out.lib;
  so.resolve("ncclGetVersion", l.GetVersion);
  so.resolve("ncclGetUniqueId", l.GetUniqueId);
  so.resolve("ncclCommInitRank", l.CommInitRank);
  so.resolve("ncclCommDestroy", l.CommDestroy);
  so.resolve("ncclCommAbort", l.CommAbort);
  so.resolve("ncclCommGetAsyncError", l.CommGetAsyncError);
  so.resolve("ncclAllReduce", l.AllReduce);
  so.resolve("ncclReduceScatter", l.ReduceScatter);
  so.resolve("ncclAllGather", l.AllGather);
  so.resolve("ncclBroadcast", l.Broadcast);
  so.resolve("ncclGroupStart", l.GroupStart);
  so.resolve("ncclGroupEnd", l.GroupEnd);
  so.resolve("ncclGetErrorString", l.GetErrorString);
  so.resolve("ncclCommSplit", l.CommSplit, /*required=*/false);
  if (!so.error().empty()) {
    out.error = fmt::format("NCCL: {} (NCCL >= 2.10 is needed)", so.error());
    return out;
  }
  if (l.GetVersion(&l.version) != ncclSuccess) l.version = 0;
  l.path = so.path();
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
