// SwiGLU on the GPU (device pointers, compute stream), with the semantics of
// kernels/cpu/swiglu.h: gu holds N rows of 2F (gate in [0, F), up in
// [F, 2F)), h [N, F] = silu(gate) * up. The same overflow-free sigmoid, the
// same exp polynomial (exp_nonpos.cuh) and every operation rounded on its own
// in the CPU's order, so the f32 results are the CPU's bits.
//
// Under mixed precision the tensors around it may be bf16 (the fused
// gate-and-up projection out of a bf16 GEMM, h into one, the gradients
// between them): each overload's *_bf16 flag says so for its pointer. bf16
// inputs are widened exactly, the arithmetic is f32, and a bf16 output is the
// f32 result rounded once.
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

void swiglu_forward(float* h, const float* gu, int64_t N, int64_t F);
void swiglu_forward(void* h, bool h_bf16, const void* gu, bool gu_bf16, int64_t N, int64_t F);

// dgu [N, 2F] overwritten from dh [N, F] and the forward's gu; dgu overlaps
// neither.
void swiglu_backward(float* dgu, const float* dh, const float* gu, int64_t N, int64_t F);
void swiglu_backward(void* dgu, bool dgu_bf16, const void* dh, bool dh_bf16, const void* gu, bool gu_bf16, int64_t N,
                     int64_t F);

}  // namespace shardtrain::cuda
