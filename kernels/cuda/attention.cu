#include "kernels/cuda/attention.h"

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/context.h"
#include "kernels/cuda/gemm.h"

#include <cmath>
#include <string>

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;  // a power of two (the tree reductions halve it)

void check_dims(const char* fn, int64_t B, int64_t T, int64_t C, int64_t NH) {
  ST_CUDA_REQUIRE(B >= 0 && T >= 0 && C > 0 && NH > 0 && C % NH == 0,
                  std::string(fn) + ": " + std::to_string(C) + " channels do not split into " + std::to_string(NH) +
                      " heads (B=" + std::to_string(B) + " T=" + std::to_string(T) + ")");
}

// One block per row r of `rows` rows of length T (row r is query t = r % T):
// the causal softmax in place, subtracting the row's max; 0 for j > t.
__global__ void causal_softmax_kernel(float* att, int64_t rows, int64_t T) {
  __shared__ float sh[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* row = att + r * T;
    const int64_t t = r % T;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j <= t; j += kThreads) m = fmaxf(m, row[j]);
    const float maxv = block_max<kThreads>(m, sh);
    float part = 0.0f;
    for (int64_t j = threadIdx.x; j <= t; j += kThreads) {
      const float e = expf(row[j] - maxv);
      row[j] = e;
      part += e;
    }
    const float inv = 1.0f / block_sum<kThreads>(part, sh);
    for (int64_t j = threadIdx.x; j < T; j += kThreads) row[j] = j <= t ? row[j] * inv : 0.0f;
  }
}

// One block per row of the score gradient (rows of length T, query t = r % T):
// dS = P * (dP - sum_{j<=t} P dP) in place over dP, 0 where masked. dP's
// [T, T] blocks are contiguous; P's are p_block apart (T*T, or NH*T*T when
// the blocks are one head's over the samples).
__global__ void softmax_backward_kernel(float* dp, const float* p, int64_t rows, int64_t T, int64_t p_block) {
  __shared__ float sh[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* drow = dp + r * T;
    const float* prow = p + (r / T) * p_block + (r % T) * T;
    const int64_t t = r % T;
    float part = 0.0f;
    for (int64_t j = threadIdx.x; j <= t; j += kThreads) part += prow[j] * drow[j];
    const float dot = block_sum<kThreads>(part, sh);
    for (int64_t j = threadIdx.x; j < T; j += kThreads) drow[j] = j <= t ? prow[j] * (drow[j] - dot) : 0.0f;
  }
}

unsigned row_blocks(int64_t rows) { return unsigned(rows < 1 ? 1 : (rows > 65535LL * 8 ? 65535LL * 8 : rows)); }

// The (sample, head) pairs of a batch as strided-batched GEMMs. One stride
// cannot step over both samples and heads (head h of sample b starts at
// b*T*3C + h*hs in qkv, at b*NH*T*T + h*T*T in att), so the host loops over
// whichever of the two is fewer and batches the other: min(B, NH) launches
// per GEMM instead of B.
struct HeadGroups {
  int64_t B, T, C, NH;
  int64_t hs() const { return C / NH; }
  bool over_samples() const { return NH < B; }  // batch the samples, loop over heads
  int64_t groups() const { return over_samples() ? NH : B; }
  int64_t batch() const { return over_samples() ? B : NH; }
  // Offsets (in floats) of group g's first pair, and the stride between the
  // pairs of a group, in qkv [B, T, 3C], out [B, T, C] and att [B, NH, T, T].
  int64_t qkv(int64_t g) const { return over_samples() ? g * hs() : g * T * 3 * C; }
  int64_t qkv_stride() const { return over_samples() ? T * 3 * C : hs(); }
  int64_t out(int64_t g) const { return over_samples() ? g * hs() : g * T * C; }
  int64_t out_stride() const { return over_samples() ? T * C : hs(); }
  int64_t att(int64_t g) const { return over_samples() ? g * T * T : g * NH * T * T; }
  int64_t att_stride() const { return over_samples() ? NH * T * T : T * T; }
};

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH) {
  check_dims("cuda::attention_forward", B, T, C, NH);
  if (B == 0 || T == 0) return;
  const HeadGroups h{B, T, C, NH};
  const int64_t hs = h.hs(), C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(float(hs));  // as the CPU computes it
  for (int64_t g = 0; g < h.groups(); ++g) {
    const float* x = qkv + h.qkv(g);
    // S = scale * Q K^T, all T x T (the masked half is overwritten by the softmax).
    gemm_strided_batched(false, true, T, T, hs, scale, x, C3, h.qkv_stride(), x + C, C3, h.qkv_stride(), 0.0f,
                         att + h.att(g), T, h.att_stride(), h.batch());
  }
  causal_softmax_kernel<<<row_blocks(B * NH * T), kThreads, 0, compute_stream()>>>(att, B * NH * T, T);
  ST_CUDA_CHECK_LAUNCH("causal_softmax_kernel");
  for (int64_t g = 0; g < h.groups(); ++g) {
    // O = P V (the zeros above the diagonal keep it causal), written into
    // the head's channels of out.
    gemm_strided_batched(false, false, T, hs, T, 1.0f, att + h.att(g), T, h.att_stride(), qkv + h.qkv(g) + 2 * C, C3,
                         h.qkv_stride(), 0.0f, out + h.out(g), C, h.out_stride(), h.batch());
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int64_t B, int64_t T,
                        int64_t C, int64_t NH) {
  check_dims("cuda::attention_backward", B, T, C, NH);
  if (B == 0 || T == 0) return;
  const HeadGroups h{B, T, C, NH};
  const int64_t hs = h.hs(), C3 = 3 * C, TT = T * T;
  const float scale = 1.0f / std::sqrt(float(hs));
  // dP, then dS in place, for one group's (sample, head) pairs: batch() [T, T]
  // blocks, contiguous. The reduce slot is not touched by gemm (bf16 GEMMs
  // use gemm_a and gemm_b), so it stays ours across the GEMMs; reusing it
  // group after group is ordered by the compute stream.
  float* dp = static_cast<float*>(scratch(ScratchSlot::reduce, size_t(h.batch() * TT) * sizeof(float)));
  for (int64_t g = 0; g < h.groups(); ++g) {
    const float* x = qkv + h.qkv(g);
    float* dx = dqkv + h.qkv(g);
    const float* dO = dout + h.out(g);
    const float* p = att + h.att(g);
    // dP = dO V^T;  dV = P^T dO (overwrites the heads' v channels).
    gemm_strided_batched(false, true, T, T, hs, 1.0f, dO, C, h.out_stride(), x + 2 * C, C3, h.qkv_stride(), 0.0f, dp, T,
                         TT, h.batch());
    gemm_strided_batched(true, false, T, hs, T, 1.0f, p, T, h.att_stride(), dO, C, h.out_stride(), 0.0f, dx + 2 * C, C3,
                         h.qkv_stride(), h.batch());
    // Softmax backward, row by row: dS = P * (dP - sum_j P dP); 0 where masked.
    softmax_backward_kernel<<<row_blocks(h.batch() * T), kThreads, 0, compute_stream()>>>(dp, p, h.batch() * T, T,
                                                                                          h.att_stride());
    ST_CUDA_CHECK_LAUNCH("softmax_backward_kernel");
    // S = scale Q K^T:  dQ = scale dS K;  dK = scale dS^T Q. Together with dV
    // every channel of dx is written: no zeroing pass.
    gemm_strided_batched(false, false, T, hs, T, scale, dp, T, TT, x + C, C3, h.qkv_stride(), 0.0f, dx, C3,
                         h.qkv_stride(), h.batch());
    gemm_strided_batched(true, false, T, hs, T, scale, dp, T, TT, x, C3, h.qkv_stride(), 0.0f, dx + C, C3,
                         h.qkv_stride(), h.batch());
  }
}

}  // namespace shardtrain::cuda
