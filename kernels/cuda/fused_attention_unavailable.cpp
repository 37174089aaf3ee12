// The fused attention of a build without cuDNN's frontend headers
// (cmake/cudnn_frontend.cmake): unavailable, with the reason; the real one
// is kernels/cuda/cudnn/fused_attention.cpp.
#ifndef SHARDTRAIN_HAVE_CUDNN_FRONTEND

#include "kernels/cuda/fused_attention.h"

#include "kernels/cuda/context.h"

namespace shardtrain::cuda {

std::string fused_attention_unavailable(int64_t /*B*/, int64_t /*T*/, int64_t /*C*/, int64_t /*NH*/, int64_t /*NKV*/) {
  return "this build has no cuDNN frontend headers (scripts/install-deps.sh installs them; then reconfigure)";
}

size_t fused_attention_saved_bytes(int64_t /*B*/, int64_t /*T*/, int64_t /*C*/, int64_t /*NH*/, bool /*bf16_io*/,
                                   int64_t /*NKV*/) {
  return 0;
}

void fused_attention_forward(void* /*out*/, void* /*saved*/, const void* /*qkv*/, int64_t /*B*/, int64_t /*T*/,
                             int64_t /*C*/, int64_t /*NH*/, bool /*bf16_io*/, int64_t /*NKV*/) {
  fail(fused_attention_unavailable(0, 0, 0, 0));
}

void fused_attention_backward(void* /*dqkv*/, const float* /*dout*/, const void* /*saved*/, const void* /*qkv*/,
                              const void* /*out*/, int64_t /*B*/, int64_t /*T*/, int64_t /*C*/, int64_t /*NH*/,
                              bool /*bf16_io*/, bool /*dqkv_bf16*/, int64_t /*NKV*/) {
  fail(fused_attention_unavailable(0, 0, 0, 0));
}

}  // namespace shardtrain::cuda

#endif
