#include "kernels/cuda/flash_attention.h"

#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/context.h"
#include "kernels/cuda/exp_nonpos.cuh"

#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

// Three kernels, all of 256 threads, each thread's values in registers and
// the tiles it shares with the others in shared memory:
//   forward   one block per (sample, query head, tile of 64 query rows), 4
//             threads per row; key/value tiles of 32 rows staged in shared
//             memory, up to the diagonal only; an online softmax per row.
//   backward  D = rowsum(dO * O) (one warp per row, into the scratch); dQ
//             with the forward's shape, recomputing P = exp(S - lse) key tile
//             by key tile; dK and dV per (sample, kv head, tile of 32 key
//             rows), 8 threads per row, looping over the query heads of the
//             group and the query tiles from the diagonal down. Each gradient
//             element is summed by one thread (its share of a dot product
//             over its row's threads by a fixed shuffle tree), so the order of
//             every sum is fixed and no float is accumulated atomically.
// Head sizes up to 64 and up to 128 are two instantiations (kD); columns at
// or past hs are zeros in registers and shared memory, so the unguarded
// products add nothing for them.

namespace shardtrain::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxHs = 128;

// The forward and the dQ kernel: query rows per block, threads per row, key
// rows per staged K/V tile. 32-row K/V tiles keep the two of them at 32 KiB
// at hs = 128 (no opt-in beyond the 48 KiB of static shared memory) and the
// forward's row of scores in 32 registers.
constexpr int kQueryRows = 64;
constexpr int kRowLanes = kThreads / kQueryRows;
constexpr int kKeyTile = 32;

// The dK/dV kernel: key rows per block, threads per row (8, so that a row's
// k, v, dK and dV take 4 x 16 registers at hs = 128), query rows per staged
// Q/dO tile. Query tiles of the key tile's height make the first one start
// at the key tile's first row: the diagonal.
constexpr int kKvRows = 32;
constexpr int kKvLanes = kThreads / kKvRows;
constexpr int kQueryTile = kKvRows;

static_assert(kQueryRows * kRowLanes == kThreads && kKvRows * kKvLanes == kThreads, "one thread group per row");

template <typename T>
struct Tag {
  using type = T;
};

// The column of a row's i-th value held by `lane` of the row's kLanes
// threads: runs of four columns per thread, so that the threads of a row read
// one contiguous span of shared memory per float4 (no bank conflicts).
template <int kLanes>
__device__ inline int column(int lane, int i) {
  return (i / 4) * (4 * kLanes) + lane * 4 + i % 4;
}

// The sum of v over the kLanes threads of a row (consecutive lanes of one
// warp), on every one of them: each butterfly step adds the same pair on
// both lanes (a + b = b + a), so all end with the same bits.
template <int kLanes>
__device__ inline float row_sum(float v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// This thread's share of x . row (row: kD floats of shared memory, 16-byte
// aligned), its columns in increasing order.
template <int kLanes, int kPer>
__device__ inline float partial_dot(const float (&x)[kPer], const float* row, int lane) {
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; i += 4) {
    const float4 y = *reinterpret_cast<const float4*>(row + column<kLanes>(lane, i));
    acc += x[i] * y.x;
    acc += x[i + 1] * y.y;
    acc += x[i + 2] * y.z;
    acc += x[i + 3] * y.w;
  }
  return acc;
}

// x += a * row over this thread's columns.
template <int kLanes, int kPer>
__device__ inline void add_scaled(float (&x)[kPer], float a, const float* row, int lane) {
#pragma unroll
  for (int i = 0; i < kPer; i += 4) {
    const float4 y = *reinterpret_cast<const float4*>(row + column<kLanes>(lane, i));
    x[i] += a * y.x;
    x[i + 1] += a * y.y;
    x[i + 2] += a * y.z;
    x[i + 3] += a * y.w;
  }
}

// This thread's columns of row t of one head (src: the head's first column
// of row 0, rows ld apart); zeros past T and past hs.
template <int kLanes, int kPer, typename E>
__device__ inline void load_row(float (&x)[kPer], const E* src, int64_t ld, int64_t t, int64_t T, int64_t hs,
                                int lane) {
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int d = column<kLanes>(lane, i);
    x[i] = t < T && d < hs ? load_f32(src, t * ld + d) : 0.0f;
  }
}

template <int kLanes, int kPer, typename E>
__device__ inline void store_row(E* dst, int64_t ld, int64_t t, int64_t hs, const float (&x)[kPer], float factor,
                                 int lane) {
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int d = column<kLanes>(lane, i);
    if (d < hs) store_f32(dst, t * ld + d, x[i] * factor);
  }
}

// Rows [r0, r0 + kRows) of one head (src as load_row) into tile[kRows][kD]
// by the whole block, as f32; zeros past T and past hs.
template <int kRows, int kD, typename E>
__device__ inline void load_tile(float* tile, const E* src, int64_t ld, int64_t r0, int64_t T, int64_t hs) {
  for (int k = threadIdx.x; k < kRows * kD; k += kThreads) {
    const int r = k / kD, d = k % kD;
    tile[k] = r0 + r < T && d < hs ? load_f32(src, (r0 + r) * ld + d) : 0.0f;
  }
}

// Where a block of the forward or the dQ kernel works. The last query tiles
// (the most key tiles to visit) get the first block indices, so that the
// longest blocks start first and the short ones fill in behind them.
struct QueryTile {
  int64_t b, head, i0;
  __device__ QueryTile(int64_t BH, int64_t H, int64_t q_tiles) {
    const int64_t blk = blockIdx.x, bh = blk % BH;
    b = bh / H;
    head = bh % H;
    i0 = (q_tiles - 1 - blk / BH) * kQueryRows;
  }
};

template <int kD, typename Out, typename In>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(Out* out, float* lse, const In* qkv, int64_t T, int64_t H, int64_t KV, int64_t hs, float scale,
                   int64_t BH, int64_t q_tiles) {
  constexpr int kPer = kD / kRowLanes;
  __shared__ __align__(16) float k_s[kKeyTile * kD];
  __shared__ __align__(16) float v_s[kKeyTile * kD];
  const QueryTile tile(BH, H, q_tiles);
  const int64_t C3 = (H + 2 * KV) * hs, group = H / KV, kv = tile.head / group;
  const In* x = qkv + tile.b * T * C3;
  const int lane = threadIdx.x % kRowLanes;
  const int64_t t = tile.i0 + threadIdx.x / kRowLanes;
  const int64_t i_end = min(tile.i0 + kQueryRows, T);
  // The last key a row sees. Rows past T (in the last tile) run as row T - 1
  // with a zero query, so that every thread takes part in the shuffles and
  // barriers; they store nothing.
  const int64_t t_vis = min(t, T - 1);

  float q[kPer], o[kPer], s[kKeyTile];
  load_row<kRowLanes>(q, x + tile.head * hs, C3, t, T, hs, lane);
#pragma unroll
  for (int i = 0; i < kPer; ++i) o[i] = 0.0f;
  // The running max and sum of the row's exponentials; o holds the weighted
  // sum of values scaled, like the sum, by e^-m.
  float m = -INFINITY, l = 0.0f;
  // Key tiles up to the block's last row only: the ones above the diagonal
  // are all masked.
  for (int64_t j0 = 0; j0 < i_end; j0 += kKeyTile) {
    __syncthreads();  // the previous tile is no longer read
    load_tile<kKeyTile, kD>(k_s, x + (H + kv) * hs, C3, j0, T, hs);
    load_tile<kKeyTile, kD>(v_s, x + (H + KV + kv) * hs, C3, j0, T, hs);
    __syncthreads();
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kKeyTile; ++j) {
      s[j] = row_sum<kRowLanes>(partial_dot<kRowLanes>(q, k_s + j * kD, lane)) * scale;
      if (j0 + j <= t_vis) tile_max = fmaxf(tile_max, s[j]);
    }
    // Key 0 is visible to every row, so m is finite after the first tile and
    // alpha is 0 there (e^-inf); a later tile may hold no key the row sees
    // (tile_max = -inf, alpha = 1, every p = 0).
    const float m_new = fmaxf(m, tile_max);
    const float alpha = exp_nonpos(m - m_new);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kKeyTile; ++j) {
      s[j] = j0 + j <= t_vis ? exp_nonpos(s[j] - m_new) : 0.0f;
      sum += s[j];
    }
    l = l * alpha + sum;
    m = m_new;
#pragma unroll
    for (int i = 0; i < kPer; ++i) o[i] *= alpha;
#pragma unroll
    for (int j = 0; j < kKeyTile; ++j) add_scaled<kRowLanes>(o, s[j], v_s + j * kD, lane);
  }
  if (t < T) {
    store_row<kRowLanes>(out + tile.b * T * H * hs + tile.head * hs, H * hs, t, hs, o, 1.0f / l, lane);
    if (lane == 0) lse[(tile.b * H + tile.head) * T + t] = m + logf(l);
  }
}

// D[b, h, t] = dO[b, t, h] . O[b, t, h], one warp per (b, t, h) row: the
// softmax backward's row term, sum_j P_tj dP_tj.
template <typename O>
__global__ void __launch_bounds__(kThreads)
    row_dot_kernel(float* D, const float* dout, const O* out, int64_t rows, int64_t T, int64_t H, int64_t hs) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (kThreads / 32);
  for (int64_t r = int64_t(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32; r < rows; r += warps) {
    // Row r = (b T + t) H + h of dout and out seen as [B T H, hs].
    float acc = 0.0f;
    for (int64_t d = lane; d < hs; d += 32) acc += dout[r * hs + d] * load_f32(out, r * hs + d);
    acc = row_sum<32>(acc);
    if (lane == 0) {
      const int64_t h = r % H, bt = r / H;
      D[(bt / T * H + h) * T + bt % T] = acc;
    }
  }
}

// dQ = scale sum_j dS_tj k_j with dS = P (dP - D), P = exp(S - lse) and
// dP = dO V^T recomputed key tile by key tile; the forward's shape.
template <int kD, typename DQ, typename In>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(DQ* dqkv, const float* dout, const In* qkv, const float* lse, const float* D, int64_t T, int64_t H,
              int64_t KV, int64_t hs, float scale, int64_t BH, int64_t q_tiles) {
  constexpr int kPer = kD / kRowLanes;
  __shared__ __align__(16) float k_s[kKeyTile * kD];
  __shared__ __align__(16) float v_s[kKeyTile * kD];
  const QueryTile tile(BH, H, q_tiles);
  const int64_t C3 = (H + 2 * KV) * hs, group = H / KV, kv = tile.head / group;
  const In* x = qkv + tile.b * T * C3;
  const int lane = threadIdx.x % kRowLanes;
  const int64_t t = tile.i0 + threadIdx.x / kRowLanes;
  const int64_t i_end = min(tile.i0 + kQueryRows, T);
  // Rows past T: a zero query and dO and lse = D = 0 (every dS is 0); they
  // store nothing.
  const int64_t t_vis = min(t, T - 1);
  const int64_t row = (tile.b * H + tile.head) * T + t;
  const float L = t < T ? lse[row] : 0.0f, Dt = t < T ? D[row] : 0.0f;

  float q[kPer], dO[kPer], dq[kPer];
  load_row<kRowLanes>(q, x + tile.head * hs, C3, t, T, hs, lane);
  load_row<kRowLanes>(dO, dout + tile.b * T * H * hs + tile.head * hs, H * hs, t, T, hs, lane);
#pragma unroll
  for (int i = 0; i < kPer; ++i) dq[i] = 0.0f;
  for (int64_t j0 = 0; j0 < i_end; j0 += kKeyTile) {
    __syncthreads();
    load_tile<kKeyTile, kD>(k_s, x + (H + kv) * hs, C3, j0, T, hs);
    load_tile<kKeyTile, kD>(v_s, x + (H + KV + kv) * hs, C3, j0, T, hs);
    __syncthreads();
    const int cols = int(min(int64_t(kKeyTile), T - j0));
    for (int j = 0; j < cols; ++j) {
      const float sc = row_sum<kRowLanes>(partial_dot<kRowLanes>(q, k_s + j * kD, lane)) * scale;
      const float dp = row_sum<kRowLanes>(partial_dot<kRowLanes>(dO, v_s + j * kD, lane));
      const float p = j0 + j <= t_vis ? exp_nonpos(sc - L) : 0.0f;
      add_scaled<kRowLanes>(dq, p * (dp - Dt), k_s + j * kD, lane);
    }
  }
  if (t < T) store_row<kRowLanes>(dqkv + tile.b * T * C3 + tile.head * hs, C3, t, hs, dq, scale, lane);
}

// dV_j = sum_{h in group, t >= j} P_tj dO_t and dK_j = scale sum dS_tj q_t,
// the sums over the group's query heads in increasing h and, within a head,
// over t in increasing order. Key tile 0 visits every query tile: the first
// key tiles get the first block indices.
template <int kD, typename DQ, typename In>
__global__ void __launch_bounds__(kThreads)
    dkv_kernel(DQ* dqkv, const float* dout, const In* qkv, const float* lse, const float* D, int64_t T, int64_t H,
               int64_t KV, int64_t hs, float scale, int64_t BKV) {
  constexpr int kPer = kD / kKvLanes;
  __shared__ __align__(16) float q_s[kQueryTile * kD];
  __shared__ __align__(16) float do_s[kQueryTile * kD];
  __shared__ float lse_s[kQueryTile], d_s[kQueryTile];
  const int64_t blk = blockIdx.x, bg = blk % BKV;
  const int64_t b = bg / KV, g = bg % KV, j0 = blk / BKV * kKvRows;
  const int64_t C3 = (H + 2 * KV) * hs, HC = H * hs, group = H / KV;
  const In* x = qkv + b * T * C3;
  const int lane = threadIdx.x % kKvLanes;
  const int64_t j = j0 + threadIdx.x / kKvLanes;  // rows past T: zero k and v, masked from every query

  float k[kPer], v[kPer], dk[kPer], dv[kPer];
  load_row<kKvLanes>(k, x + (H + g) * hs, C3, j, T, hs, lane);
  load_row<kKvLanes>(v, x + (H + KV + g) * hs, C3, j, T, hs, lane);
#pragma unroll
  for (int i = 0; i < kPer; ++i) dk[i] = dv[i] = 0.0f;
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    const float* L = lse + (b * H + h) * T;
    const float* Dh = D + (b * H + h) * T;
    for (int64_t i0 = j0; i0 < T; i0 += kQueryTile) {
      __syncthreads();
      load_tile<kQueryTile, kD>(q_s, x + h * hs, C3, i0, T, hs);
      load_tile<kQueryTile, kD>(do_s, dout + b * T * HC + h * hs, HC, i0, T, hs);
      for (int r = threadIdx.x; r < kQueryTile; r += kThreads) {
        lse_s[r] = i0 + r < T ? L[i0 + r] : 0.0f;
        d_s[r] = i0 + r < T ? Dh[i0 + r] : 0.0f;
      }
      __syncthreads();
      const int rows = int(min(int64_t(kQueryTile), T - i0));
      for (int r = 0; r < rows; ++r) {
        const float sc = row_sum<kKvLanes>(partial_dot<kKvLanes>(k, q_s + r * kD, lane)) * scale;
        const float dp = row_sum<kKvLanes>(partial_dot<kKvLanes>(v, do_s + r * kD, lane));
        const float p = j <= i0 + r ? exp_nonpos(sc - lse_s[r]) : 0.0f;
        add_scaled<kKvLanes>(dv, p, do_s + r * kD, lane);
        add_scaled<kKvLanes>(dk, p * (dp - d_s[r]), q_s + r * kD, lane);
      }
    }
  }
  if (j < T) {
    store_row<kKvLanes>(dqkv + b * T * C3 + (H + g) * hs, C3, j, hs, dk, scale, lane);
    store_row<kKvLanes>(dqkv + b * T * C3 + (H + KV + g) * hs, C3, j, hs, dv, 1.0f, lane);
  }
}

void check_sizes(const char* fn, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs) {
  const std::string dims = " (B=" + std::to_string(B) + ", T=" + std::to_string(T) + ", H=" + std::to_string(H) +
                           ", KV=" + std::to_string(KV) + ", hs=" + std::to_string(hs) + ")";
  ST_CUDA_REQUIRE(B > 0 && T > 0 && H > 0 && KV > 0 && hs > 0, std::string(fn) + ": sizes must be positive" + dims);
  ST_CUDA_REQUIRE(H % KV == 0, std::string(fn) + ": " + std::to_string(H) +
                                   " query heads do not split into groups over " + std::to_string(KV) +
                                   " key/value heads");
  ST_CUDA_REQUIRE(hs <= kMaxHs, std::string(fn) + ": head size " + std::to_string(hs) + " above the " +
                                    std::to_string(kMaxHs) + " the tiled CUDA kernel supports");
  // One block per tile of 32 rows at most, in a one-dimensional grid.
  ST_CUDA_REQUIRE(B * H * ((T + kKvRows - 1) / kKvRows) <= INT_MAX, std::string(fn) + ": too many tiles" + dims);
}

template <typename F>
void with_type(bool bf16, F&& f) {
  if (bf16) {
    f(Tag<uint16_t>{});
  } else {
    f(Tag<float>{});
  }
}

// The kD instantiation for a head size: 64 or 128 columns.
template <typename F>
void with_head_size(int64_t hs, F&& f) {
  if (hs <= 64) {
    f(std::integral_constant<int, 64>{});
  } else {
    f(std::integral_constant<int, 128>{});
  }
}

}  // namespace

void flash_attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                             int64_t hs) {
  flash_attention_forward(out, false, lse, qkv, false, B, T, H, KV, hs);
}

void flash_attention_forward(void* out, bool out_bf16, float* lse, const void* qkv, bool qkv_bf16, int64_t B, int64_t T,
                             int64_t H, int64_t KV, int64_t hs) {
  check_sizes("cuda::flash_attention_forward", B, T, H, KV, hs);
  const float scale = 1.0f / std::sqrt(float(hs));  // as the CPU computes it
  const int64_t q_tiles = (T + kQueryRows - 1) / kQueryRows;
  const unsigned blocks = unsigned(B * H * q_tiles);
  with_type(out_bf16, [&](auto out_tag) {
    using Out = typename decltype(out_tag)::type;
    with_type(qkv_bf16, [&](auto in_tag) {
      using In = typename decltype(in_tag)::type;
      with_head_size(hs, [&](auto d) {
        forward_kernel<decltype(d)::value, Out, In><<<blocks, kThreads, 0, compute_stream()>>>(
            static_cast<Out*>(out), lse, static_cast<const In*>(qkv), T, H, KV, hs, scale, B * H, q_tiles);
        ST_CUDA_CHECK_LAUNCH("flash_attention forward_kernel");
      });
    });
  });
}

int64_t flash_attention_scratch_floats(int64_t T, int64_t hs, int64_t B, int64_t H) {
  ST_CUDA_REQUIRE(T > 0 && hs > 0 && B > 0 && H > 0,
                  "cuda::flash_attention_scratch_floats: sizes must be positive (T=" + std::to_string(T) +
                      ", hs=" + std::to_string(hs) + ", B=" + std::to_string(B) + ", H=" + std::to_string(H) + ")");
  return B * H * T;  // D, one float per query row and head
}

void flash_attention_backward(void* dqkv, bool dqkv_bf16, float* scratch, const float* dout, const void* qkv,
                              bool qkv_bf16, const void* out, bool out_bf16, const float* lse, int64_t B, int64_t T,
                              int64_t H, int64_t KV, int64_t hs) {
  check_sizes("cuda::flash_attention_backward", B, T, H, KV, hs);
  const float scale = 1.0f / std::sqrt(float(hs));
  float* D = scratch;
  const int64_t rows = B * T * H;
  with_type(out_bf16, [&](auto out_tag) {
    using O = typename decltype(out_tag)::type;
    row_dot_kernel<O><<<grid_for(rows * 32, kThreads), kThreads, 0, compute_stream()>>>(
        D, dout, static_cast<const O*>(out), rows, T, H, hs);
    ST_CUDA_CHECK_LAUNCH("flash_attention row_dot_kernel");
  });
  // dQ writes the q columns of dqkv, dK/dV the k and v columns: together
  // every element, so no zeroing pass.
  const int64_t q_tiles = (T + kQueryRows - 1) / kQueryRows, k_tiles = (T + kKvRows - 1) / kKvRows;
  with_type(dqkv_bf16, [&](auto dq_tag) {
    using DQ = typename decltype(dq_tag)::type;
    with_type(qkv_bf16, [&](auto in_tag) {
      using In = typename decltype(in_tag)::type;
      with_head_size(hs, [&](auto d) {
        constexpr int kD = decltype(d)::value;
        DQ* dx = static_cast<DQ*>(dqkv);
        const In* x = static_cast<const In*>(qkv);
        dq_kernel<kD, DQ, In><<<unsigned(B * H * q_tiles), kThreads, 0, compute_stream()>>>(
            dx, dout, x, lse, D, T, H, KV, hs, scale, B * H, q_tiles);
        ST_CUDA_CHECK_LAUNCH("flash_attention dq_kernel");
        dkv_kernel<kD, DQ, In><<<unsigned(B * KV * k_tiles), kThreads, 0, compute_stream()>>>(dx, dout, x, lse, D, T, H,
                                                                                              KV, hs, scale, B * KV);
        ST_CUDA_CHECK_LAUNCH("flash_attention dkv_kernel");
      });
    });
  });
}

}  // namespace shardtrain::cuda
