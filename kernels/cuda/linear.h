// Fully connected layer on the GPU, the contract of cpu::linear_forward and
// cpu::linear_backward (kernels/cpu/linear.h): weight [OC, IC] (PyTorch
// layout), bias [OC], device pointers, work on compute_stream().
//   out[N,OC] = in[N,IC] * weight^T + bias
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

// What a linear layer may fuse around its GEMMs, and the types of its
// activations; all optional.
//   bf16      Where GEMMs are bf16: the forward's bf16 copies of `weight`
//             [OC, IC] and `in` [N, IC] (unless in_bf16), kept in the
//             layer's own buffer (linear_kept_bf16_elements values: the
//             weight's copy, then, 256-byte aligned, the input's) for its
//             backward, whose two GEMMs read them instead of converting
//             again, and which converts dout once for both. Three
//             conversions a step instead of six, with the same bf16 values,
//             so the same results.
//   weight_kept  The buffer already holds this weight's copy (an earlier
//             forward made it and the weight has not changed: the
//             micro-batches after a step's first): the forward converts
//             only the input. The weight's place does not depend on N.
//   gelu_pre  The GELU after this layer (forward) or before it (backward).
//             Forward: gelu_pre [N, OC] receives in*W^T + bias and out its
//             GELU. Backward, for a layer whose input was gelu(gelu_pre)
//             ([N, IC]): din receives the gradient with respect to
//             gelu_pre. Where GEMMs are bf16, one GEMM each with
//             cuBLASLt's GELU epilogues (the forward's with a bias only);
//             else the GEMM and the GELU kernel (kernels/cuda/activation.h).
//   *_bf16    Mixed precision's bf16 activations (kernels/ops.h), which need
//             the kept buffer: `in` (the forward's input, which the backward
//             then reads as it is: no copy), the forward's out and
//             gelu_pre, the backward's dout, and its din and gelu_pre (one
//             flag for both: cuBLASLt's GELU aux matrix has the output's
//             type). A bf16 result is the f32 one rounded once.
struct LinearFusion {
  void* bf16 = nullptr;
  void* gelu_pre = nullptr;
  bool in_bf16 = false, out_bf16 = false, dout_bf16 = false, din_bf16 = false;
  bool weight_kept = false;
};
int64_t linear_kept_bf16_elements(int64_t N, int64_t IC, int64_t OC, bool in_bf16 = false);

// bias may be null. out and in are f32 unless fusion says bf16.
void linear_forward(void* out, const void* in, const float* weight, const float* bias, int64_t N, int64_t IC,
                    int64_t OC, const LinearFusion& fusion = {});

// din (may be null) is overwritten. dweight and dbias (dbias may be null) are
// overwritten, or added to when `accumulate`. With linear_backend() cublaslt
// the forward's bias and the overwritten dbias come from cuBLASLt epilogues
// of the GEMMs (gemm_lt.h); otherwise, and where cuBLASLt has no algorithm,
// a bias fill before the GEMM and a deterministic two-stage column sum
// (column_sum.h). With fusion.bf16 the forward's kept copies stand in for
// `in` and `weight`.
void linear_backward(void* din, float* dweight, float* dbias, const void* dout, const void* in, const float* weight,
                     int64_t N, int64_t IC, int64_t OC, bool accumulate, const LinearFusion& fusion = {});

}  // namespace shardtrain::cuda
