// Fully connected layer on the GPU, the contract of cpu::linear_forward and
// cpu::linear_backward (kernels/cpu/linear.h): weight [OC, IC] (PyTorch
// layout), bias [OC], device pointers, work on compute_stream().
//   out[N,OC] = in[N,IC] * weight^T + bias
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

// What a linear layer may fuse around its GEMMs; both are optional.
//   bf16      Where GEMMs are bf16: the forward's bf16 copies of `in`
//             [N, IC] and `weight` [OC, IC], kept in the layer's own buffer
//             (linear_kept_bf16_elements values: the input, then, 256-byte
//             aligned, the weight) for its backward, whose two GEMMs read
//             them instead of converting again, and which converts dout
//             once for both. Three conversions a step instead of six, with
//             the same bf16 values, so the same results.
//   gelu_pre  The GELU after this layer (forward) or before it (backward).
//             Forward: gelu_pre [N, OC] receives in*W^T + bias and out its
//             GELU. Backward, for a layer whose input was gelu(gelu_pre)
//             ([N, IC]): din receives the gradient with respect to
//             gelu_pre. Where GEMMs are bf16, one GEMM each with
//             cuBLASLt's GELU epilogues (the forward's with a bias only);
//             else the GEMM and the GELU kernel (kernels/cuda/activation.h).
struct LinearFusion {
  void* bf16 = nullptr;
  float* gelu_pre = nullptr;
};
int64_t linear_kept_bf16_elements(int64_t N, int64_t IC, int64_t OC);

// bias may be null.
void linear_forward(float* out, const float* in, const float* weight, const float* bias, int64_t N, int64_t IC,
                    int64_t OC, const LinearFusion& fusion = {});

// din (may be null) is overwritten. dweight and dbias (dbias may be null) are
// overwritten, or added to when `accumulate`. With linear_backend() cublaslt
// the forward's bias and the overwritten dbias come from cuBLASLt epilogues
// of the GEMMs (gemm_lt.h); otherwise, and where cuBLASLt has no algorithm,
// a bias fill before the GEMM and a deterministic two-stage column sum
// (column_sum.h). With fusion.bf16 the forward's kept copies stand in for
// `in` and `weight`.
void linear_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     int64_t N, int64_t IC, int64_t OC, bool accumulate, const LinearFusion& fusion = {});

}  // namespace shardtrain::cuda
