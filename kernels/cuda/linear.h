// Fully connected layer on the GPU, the contract of cpu::linear_forward and
// cpu::linear_backward (kernels/cpu/linear.h): weight [OC, IC] (PyTorch
// layout), bias [OC], device pointers, work on compute_stream().
//   out[N,OC] = in[N,IC] * weight^T + bias
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

// bias may be null.
void linear_forward(float* out, const float* in, const float* weight, const float* bias, int64_t N, int64_t IC,
                    int64_t OC);

// din (may be null) is overwritten. dweight and dbias (dbias may be null) are
// overwritten, or added to when `accumulate`. With linear_backend() cublaslt
// the forward's bias and the overwritten dbias come from cuBLASLt epilogues
// of the GEMMs (gemm_lt.h); otherwise, and where cuBLASLt has no algorithm,
// a bias fill before the GEMM and a deterministic two-stage column sum
// (column_sum.h).
void linear_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     int64_t N, int64_t IC, int64_t OC, bool accumulate);

// Where GEMMs are bf16, the forward's bf16 copies of `in` [N, IC] and
// `weight` [OC, IC], kept in the layer's own buffer for its backward: the
// backward's two GEMMs read them instead of converting again, and convert
// dout once for both. Three conversions a step instead of six, with the
// same bf16 values, so the same results. `bf16` holds
// linear_kept_bf16_elements bf16 values: the input, then (256-byte aligned)
// the weight.
int64_t linear_kept_bf16_elements(int64_t N, int64_t IC, int64_t OC);
void linear_forward_keep_bf16(float* out, void* bf16, const float* in, const float* weight, const float* bias,
                              int64_t N, int64_t IC, int64_t OC);
void linear_backward_kept_bf16(float* din, float* dweight, float* dbias, const float* dout, const void* bf16, int64_t N,
                               int64_t IC, int64_t OC, bool accumulate);

}  // namespace shardtrain::cuda
