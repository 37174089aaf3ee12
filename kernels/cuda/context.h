// The process's CUDA context: one device per rank, three streams, the cuBLAS
// handle and the GEMM precision policy. Compiled only with the CUDA backend;
// code above kernels/ reaches it through kernels/devices.h.
//
// .cu files include this header but no fmt-based runtime header (nvcc's front
// end rejects fmt's compile-time format strings): they raise errors through
// cuda::fail() / ST_CUDA_REQUIRE with messages built from std::string.
//
// Streams (created non-blocking, so nothing synchronizes with the legacy
// default stream):
//   compute  every kernel of kernels/cuda and every copy_tensor
//   comm     NCCL collectives and device<->host staging of MPI collectives;
//            ordered after compute by events, never by a device-wide sync
//   copy     host-to-device input batches from pinned memory
#pragma once

#include "kernels/cuda/cublas_library.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace shardtrain::cuda {

// Throws shardtrain::Error with this message.
[[noreturn]] void fail(const std::string& message);

#define ST_CUDA_REQUIRE(cond, message)              \
  do {                                              \
    if (!(cond)) ::shardtrain::cuda::fail(message); \
  } while (0)

// Throws shardtrain::Error naming the call, the file and line and CUDA's reason.
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* what, const char* file, int line);

#define ST_CUDA_CHECK(expr)                                                                                         \
  do {                                                                                                              \
    cudaError_t st_cuda_err_ = (expr);                                                                              \
    if (st_cuda_err_ != cudaSuccess) ::shardtrain::cuda::throw_cuda_error(st_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define ST_CUBLAS_CHECK(expr)                                                               \
  do {                                                                                      \
    cublasStatus_t st_cublas_status_ = (expr);                                              \
    if (st_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                         \
      ::shardtrain::cuda::throw_cublas_error(st_cublas_status_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch errors (bad configuration, no device) as an Error.
#define ST_CUDA_CHECK_LAUNCH(kernel_name) ST_CUDA_CHECK(cudaGetLastError())

// How GEMMs of f32 tensors run: plain f32, TF32 tensor cores (f32 in and out,
// 10-bit mantissa products), or bf16 operands with f32 accumulation.
enum class GemmPrecision { f32, tf32, bf16 };
GemmPrecision parse_gemm_precision(const std::string& name);  // "f32" | "tf32" | "bf16"
const char* gemm_precision_name(GemmPrecision p);

// Selects `index` for this process (and thread), creates the streams and the
// cuBLAS handle, registers the caching device allocator, the pinned host
// allocator and the device memory ops (runtime/core). Idempotent for the same
// index; an Error for another index once brought up.
void init_device(int index);
bool device_initialized();
int current_device();

cudaStream_t compute_stream();
cudaStream_t comm_stream();
cudaStream_t copy_stream();
cublasHandle_t cublas();  // bound to the compute stream

void set_gemm_precision(GemmPrecision p);
GemmPrecision gemm_precision();

// How linear layers run their GEMMs: cuBLASLt with the bias and bias-gradient
// epilogues (kernels/cuda/gemm_lt.h), or cuBLAS plus separate bias kernels,
// the reference (and the fallback where cuBLASLt offers no algorithm).
enum class LinearBackend { cublaslt, cublas };
LinearBackend parse_linear_backend(const std::string& name);  // "cublaslt" | "cublas"
void set_linear_backend(LinearBackend b);
LinearBackend linear_backend();

// How attention runs where GEMMs are bf16: cuDNN's fused flash attention
// (kernels/cuda/fused_attention.h), or the materialized kernels
// (kernels/cuda/attention.h), the reference. At f32 and tf32 attention is
// always materialized: cuDNN's fused kernels take bf16 or fp16 inputs only.
enum class AttentionBackend { cudnn, materialized, tiled };
AttentionBackend parse_attention_backend(const std::string& name);  // "cudnn" | "materialized" | "tiled"
void set_attention_backend(AttentionBackend b);
AttentionBackend attention_backend();

// Blocks until the compute stream has drained (used where the host must read
// a result: a loss, a norm), then raises a kernel-found error (below). Never
// a device-wide synchronization.
void sync_compute();

// Errors that kernels find (an embedding id outside the table) are raised on
// the host at a later wait for the compute stream, not by a wait of their
// own: a check that waited would stall every step (the GPU idle while the
// host issues the next kernels). The kernel that finds one fills the record,
// first error kept, and skips the bad element instead of reading outside its
// buffers. The waits that raise it: sync_compute (and so
// DeviceMemoryOps::copy to or from the host and synchronize, and the
// reductions read back to the host) and DeviceMemoryOps::wait_read_back (the
// training step's one wait). Each queues the record's copy into pinned host
// memory before it waits (publish_device_error), then throws the Error once
// and clears the record (raise_device_error). Other waits (the input slots'
// events, collectives' Work::wait, other threads) do not raise: the error
// waits for the next of those that do.
enum class DeviceErrorKind : int { none = 0, embedding_id = 1 };
struct DeviceErrorRecord {
  int kind;            // DeviceErrorKind
  int value;           // the bad value (an id)
  long long position;  // where it was
  long long limit;     // the bound it broke ([0, limit))
};
DeviceErrorRecord* device_error_record();  // device memory, zeroed when created
// A device word for checks that look for the first bad position: all bits
// set when no check holds it (an atomicMin target; whoever reads it sets it
// back to all bits set, so no memset is needed per check).
unsigned long long* device_first_bad();
void publish_device_error();
void raise_device_error();
std::string device_error_message(const DeviceErrorRecord& r);

// Blocks per grid for n elements at `threads` per block, capped at a grid that
// a grid-stride loop covers.
inline unsigned grid_for(int64_t n, int threads = 256) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > 65535LL * 8) blocks = 65535LL * 8;
  return unsigned(blocks);
}

// A device scratch buffer owned by the context, grown on demand (for small
// per-call workspaces such as reduction partials and labels copied from the
// host). Valid until the next call of the same slot; ordered on the compute
// stream. Grown through the caching allocator's pool (allocate_workspace):
// the old buffer goes back stream-ordered, so growing waits for nothing.
enum class ScratchSlot {
  reduce,
  labels,
  gemm_a,
  gemm_b,
  conv_cols,
  conv_partials,
  embedding_sort,
  lt_workspace,
  attention_grads,      // the fused attention backward's bf16 dO and dQKV
  attention_workspace,  // cuDNN's workspace for the fused attention
  staging_0,            // f32 stand-ins for bf16 activations where a kernel
  staging_1,            //   has no bf16 form (the fallbacks of mixed
  staging_2             //   precision; kernels/ops.h)
};
inline constexpr size_t kScratchSlots = 13;
void* scratch(ScratchSlot slot, size_t bytes);
size_t scratch_bytes();  // all slots together: the kernels' workspaces

}  // namespace shardtrain::cuda
