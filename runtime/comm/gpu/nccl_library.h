// NCCL, loaded with dlopen at first use rather than linked: shardtrain's
// binaries start (and run their CPU paths) on machines without NCCL, and on
// GPU machines pick up whichever libnccl.so.2 the dynamic loader finds (the
// one of PyTorch's pip package, site-packages/nvidia/nccl/lib, through
// LD_LIBRARY_PATH). nccl.h is used for its types and enums only.
#pragma once

#include <nccl.h>

#include <string>

namespace shardtrain::comm {

struct NcclLibrary {
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclBroadcast) Broadcast = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  // Optional (NCCL >= 2.18); null when the library lacks it.
  decltype(&::ncclCommSplit) CommSplit = nullptr;

  int version = 0;   // ncclGetVersion's code: 22703 for 2.27.3 (1000*major + 100*minor + patch before 2.9)
  std::string path;  // where dladdr says the library was loaded from, else its soname

  // "2.27.3"
  std::string version_string() const;
  // ncclAvg and ncclBfloat16 exist from NCCL 2.10.
  bool has_avg() const { return version >= 21000; }
  bool has_bf16() const { return version >= 21000; }
};

// The library, loaded and resolved at the first call (thread-safe). Throws
// shardtrain::Error when libnccl.so.2 cannot be loaded ("NCCL (libnccl.so.2)
// not found: <dlerror> ... set LD_LIBRARY_PATH") or lacks a function.
const NcclLibrary& nccl();
// Whether nccl() would succeed; otherwise the reason in *why.
bool nccl_available(std::string* why = nullptr);

// Throws shardtrain::Error "<what>: NCCL error <code> (<ncclGetErrorString>)".
void throw_nccl_error(ncclResult_t result, const char* what, const char* file, int line);

#define ST_NCCL_CHECK(expr)                                                             \
  do {                                                                                  \
    ncclResult_t st_nccl_result_ = (expr);                                              \
    if (st_nccl_result_ != ncclSuccess)                                                 \
      ::shardtrain::comm::throw_nccl_error(st_nccl_result_, #expr, __FILE__, __LINE__); \
  } while (0)

}  // namespace shardtrain::comm
