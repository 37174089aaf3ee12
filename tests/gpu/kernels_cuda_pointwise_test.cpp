// GPU kernels of kernels/cuda (elementwise, activation, optimizer_update,
// cross_entropy, layernorm, embedding, pool) against the CPU kernels of
// kernels/cpu on the same random inputs. Outputs are poisoned (NaN) before
// each call, so an element a kernel fails to write shows up as an infinite
// error. Every comparison prints one GPUCHECK line.
//
// Limits: kLimitF32 (1e-5 relative norm) throughout. Most of these kernels
// round every operation exactly as the CPU does (same order, no FMA
// contraction, the CPU's exp polynomial), so they agree bit for bit; the
// reductions (sum_squares, the row sums of softmax and layernorm) add in a
// different but fixed order, which moves a result by a few f32 ulps (relative
// ~1e-7), far below the limit.
#include "kernels/cpu/activation.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/optimizer_update.h"
#include "kernels/cpu/pool.h"
#include "kernels/devices.h"
#include "runtime/core/device_memory.h"
#include "runtime/core/error.h"
#include "tests/gpu/gpu_test_util.h"

#if defined(SHARDTRAIN_HAVE_CUDA)
#include "kernels/cuda/activation.h"
#include "kernels/cuda/column_sum.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/optimizer_update.h"
#include "kernels/cuda/pool.h"

#include <cuda_runtime.h>
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace shardtrain {
namespace {

#if defined(SHARDTRAIN_HAVE_CUDA)

using gpu_test::gpu;
using gpu_test::kLimitF32;
using gpu_test::poisoned;
using gpu_test::random_host;
using gpu_test::rel_error;
using gpu_test::rel_error_scalar;
using gpu_test::report;
using gpu_test::to_host;

Tensor dev(const Tensor& host) { return to_device(host, gpu()); }

// A host copy (the CPU reference is computed in place on it).
Tensor clone_host(const Tensor& host) {
  Tensor t = Tensor::empty(host.shape(), host.dtype());
  std::memcpy(t.raw(), host.raw(), host.nbytes());
  return t;
}

Tensor random_ids(int64_t n, int64_t V, uint64_t seed) {
  Tensor t = Tensor::empty({n}, DType::i32);
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) t.i32()[i] = int32_t(rng.below(uint64_t(V)));
  return t;
}

std::vector<int32_t> random_labels(int64_t N, int64_t C, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> y(static_cast<size_t>(N));
  for (auto& v : y) v = int32_t(rng.below(uint64_t(C)));
  return y;
}

// Elements of two i32 tensors (the first may live on the GPU) that differ.
int64_t i32_mismatches(const Tensor& got_any, const Tensor& want) {
  const Tensor got = to_host(got_any);
  EXPECT_EQ(got.numel(), want.numel());
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) bad += got.i32()[i] != want.i32()[i] ? 1 : 0;
  return bad;
}

// ---- elementwise ------------------------------------------------------------

TEST(CudaElementwise, SumSquaresMatchesCpuAndRepeats) {
  ST_REQUIRE_GPU();
  const int64_t n = (int64_t(1) << 20) + 5;  // not a multiple of any block size
  const Tensor x = random_host({n}, 101, -2.0f, 2.0f);
  const Tensor d = dev(x);
  const double got = cuda::sum_squares(d.f32(), n);
  const double want = cpu::sum_squares(x.f32(), n);
  report("sum_squares", "f32", rel_error_scalar(got, want), kLimitF32);
  // Deterministic: the same bits on a second call.
  const double again = cuda::sum_squares(d.f32(), n);
  EXPECT_EQ(std::memcmp(&got, &again, sizeof got), 0);
  // A short vector (one partial block).
  const double small = cuda::sum_squares(d.f32(), 37);
  report("sum_squares", "f32", rel_error_scalar(small, cpu::sum_squares(x.f32(), 37)), kLimitF32);
}

// Clipping keeps the norm on the device. By a squared norm given in f32 the
// factor is the CPU's bit for bit (same double sqrt and division); by the
// norm of x itself it differs only through the sum's order.
TEST(CudaElementwise, ClippingMatchesCpu) {
  ST_REQUIRE_GPU();
  const int64_t n = (int64_t(1) << 18) + 3;
  const Tensor x = random_host({n}, 105, -0.5f, 0.5f);
  const double norm = std::sqrt(cpu::sum_squares(x.f32(), n));  // about 147
  for (const double max_norm : {1.0, 1000.0, 0.0}) {            // clipped, not clipped, off
    const Tensor d = dev(x);
    cuda::clip_to_max_norm(d.f32(), n, max_norm);
    const Tensor want = clone_host(x);
    cpu::clip_to_norm(want.f32(), n, norm, max_norm);
    report("clip_to_max_norm", "f32", rel_error(d, want), kLimitF32);

    const Tensor sq = poisoned({1});
    const Tensor e = dev(x);
    cuda::sum_squares_into(sq.f32(), e.f32(), n);
    const float sq_host = to_host(sq).f32()[0];
    report("sum_squares_into", "f32", rel_error_scalar(sq_host, norm * norm), kLimitF32);
    cuda::clip_to_squared_norm(e.f32(), n, sq.f32(), max_norm);
    const Tensor want_sq = clone_host(x);
    cpu::clip_to_norm(want_sq.f32(), n, std::sqrt(double(sq_host)), max_norm);
    const Tensor got = to_host(e);
    EXPECT_EQ(std::memcmp(got.raw(), want_sq.raw(), got.nbytes()), 0) << "max_norm " << max_norm;
  }
}

// Bias gradients: column sums in two stages against the CPU's rows in order,
// for shapes that fill no chunk, one and a part, and many (the wide GPT's
// 8,192 rows, plus a remainder), overwriting and accumulating.
TEST(CudaColumnSum, MatchesRowsInOrder) {
  ST_REQUIRE_GPU();
  struct Shape2 {
    int64_t N, C;
  };
  for (const Shape2 s : {Shape2{1, 1}, Shape2{cuda::kColumnSumRows + 3, 65}, Shape2{8195, 257}, Shape2{0, 7}}) {
    const Tensor x = random_host({s.N > 0 ? s.N : 1, s.C}, 106);
    const Tensor dx = dev(x);
    for (const bool accumulate : {false, true}) {
      const Tensor start = random_host({s.C}, 107);
      const Tensor out = accumulate ? dev(start) : poisoned({s.C});
      cuda::column_sums(out.f32(), dx.f32(), s.N, s.C, accumulate);
      Tensor want = clone_host(start);
      for (int64_t c = 0; c < s.C; ++c) {
        float acc = accumulate ? start.f32()[c] : 0.0f;
        for (int64_t n = 0; n < s.N; ++n) acc += x.f32()[n * s.C + c];
        want.f32()[c] = acc;
      }
      report(accumulate ? "column_sums_acc" : "column_sums", "f32", rel_error(out, want), kLimitF32);
    }
  }
}

TEST(CudaElementwise, ScaleInplaceMatchesCpu) {
  ST_REQUIRE_GPU();
  const int64_t n = 1000003;
  const Tensor x = random_host({n}, 102);
  const Tensor d = dev(x);
  cuda::scale_inplace(d.f32(), n, 0.3712f);
  const Tensor want = clone_host(x);
  cpu::scale_inplace(want.f32(), n, 0.3712f);
  report("scale_inplace", "f32", rel_error(d, want), kLimitF32);
}

TEST(CudaElementwise, AddMatchesCpuAlsoInPlace) {
  ST_REQUIRE_GPU();
  const int64_t n = 1000003;
  const Tensor a = random_host({n}, 103), b = random_host({n}, 104);
  const Tensor da = dev(a), db = dev(b);
  const Tensor out = poisoned({n});
  cuda::add(out.f32(), da.f32(), db.f32(), n);
  const Tensor want = Tensor::empty({n});
  cpu::add(want.f32(), a.f32(), b.f32(), n);
  report("add", "f32", rel_error(out, want), kLimitF32);
  // out aliasing a (a residual connection in place).
  cuda::add(da.f32(), da.f32(), db.f32(), n);
  report("add", "f32", rel_error(da, want), kLimitF32);
}

TEST(CudaElementwise, AccumulateMatchesCpu) {
  ST_REQUIRE_GPU();
  const int64_t n = 1000003;
  const Tensor y = random_host({n}, 105), x = random_host({n}, 106);
  const Tensor dy = dev(y), dx = dev(x);
  cuda::accumulate(dy.f32(), dx.f32(), n);
  const Tensor want = clone_host(y);
  cpu::accumulate(want.f32(), x.f32(), n);
  report("accumulate", "f32", rel_error(dy, want), kLimitF32);
}

TEST(CudaElementwise, F32ToBf16IsBitIdenticalToCpu) {
  ST_REQUIRE_GPU();
  const int64_t n = 1 << 20;
  // Wide magnitudes: uniform mantissas times 2^[-20, 20).
  Tensor x = random_host({n}, 107);
  Rng rng(1107);
  for (float& v : x.f32_span()) v = std::ldexp(v, int(rng.below(40)) - 20);
  // Specials and rounding ties at the front: NaN, infinities, signed zeros,
  // exact ties to even (0x3F808000 rounds down, 0x3F818000 rounds up), the
  // largest finite float (rounds to infinity), a denormal.
  const uint32_t specials[] = {0x7FC00000u, 0x7F800001u, 0x7F800000u, 0xFF800000u, 0x00000000u,
                               0x80000000u, 0x3F808000u, 0x3F818000u, 0x7F7FFFFFu, 0x00000001u};
  for (size_t i = 0; i < std::size(specials); ++i) std::memcpy(&x.f32()[i], &specials[i], 4);
  const Tensor dx = dev(x);
  const Tensor out = poisoned({n}, DType::bf16);
  cuda::f32_to_bf16(out.bf16_data(), dx.f32(), n);
  std::vector<bf16> want(static_cast<size_t>(n));
  cpu::f32_to_bf16(want.data(), x.f32(), n);
  const Tensor got = to_host(out);
  int64_t mismatched = 0;
  for (int64_t i = 0; i < n; ++i) mismatched += got.bf16_data()[i].bits != want[size_t(i)].bits;
  EXPECT_EQ(mismatched, 0) << "bf16 bit patterns that differ from the CPU's";
  // The relative error of the finite part, widened back to f32.
  const int64_t skip = int64_t(std::size(specials));
  const Tensor got_f = Tensor::empty({n - skip}), want_f = Tensor::empty({n - skip});
  for (int64_t i = skip; i < n; ++i) {
    got_f.f32()[i - skip] = to_f32(got.bf16_data()[i]);
    want_f.f32()[i - skip] = to_f32(want[size_t(i)]);
  }
  report("f32_to_bf16", "f32", rel_error(got_f, want_f), kLimitF32);
}

TEST(CudaElementwise, Bf16ToF32IsExact) {
  ST_REQUIRE_GPU();
  const int64_t n = 1 << 20;
  Tensor h = Tensor::empty({n}, DType::bf16);
  Rng rng(108);
  for (int64_t i = 0; i < n; ++i) {
    // Random finite bf16 patterns (exponent field below all-ones).
    uint16_t bits = uint16_t(rng.below(1u << 16));
    if ((bits & 0x7F80u) == 0x7F80u) bits = uint16_t(bits & 0xBFFFu);
    h.bf16_data()[i] = bf16{bits};
  }
  const Tensor dh = dev(h);
  const Tensor out = poisoned({n});
  cuda::bf16_to_f32(out.f32(), dh.bf16_data(), n);
  const Tensor want = Tensor::empty({n});
  cpu::bf16_to_f32(want.f32(), h.bf16_data(), n);
  report("bf16_to_f32", "f32", rel_error(out, want), kLimitF32);
  const Tensor got = to_host(out);
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0);
}

// More than 2^31 elements through the conversions and the sum of squares:
// an index kept in 32 bits would leave the tail unwritten (the outputs start
// as NaN patterns) or read outside the buffer. Every input element is the
// float with bytes 0x3F3F3F3F; the ends and a stride of positions beyond
// 2^31 are read back. Needs about 22 GB of free device memory.
TEST(CudaElementwise, ConversionsAndSumOfSquaresPast2To31Elements) {
  ST_REQUIRE_GPU();
  const int64_t n = (int64_t(1) << 31) + 4099;
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (free_bytes < size_t(n) * 10 + (size_t(1) << 30)) GTEST_SKIP() << "skipped: " << free_bytes << " bytes free";
  float v = 0;
  const uint32_t pattern = 0x3F3F3F3Fu;
  std::memcpy(&v, &pattern, 4);
  const Tensor x = Tensor::empty({n}, DType::f32, gpu());
  ASSERT_EQ(cudaMemset(x.f32(), 0x3F, size_t(n) * 4), cudaSuccess);
  const Tensor half = Tensor::empty({n}, DType::bf16, gpu()), back = Tensor::empty({n}, DType::f32, gpu());
  ASSERT_EQ(cudaMemset(half.raw(), 0xFF, size_t(n) * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(back.raw(), 0xFF, size_t(n) * 4), cudaSuccess);
  cuda::f32_to_bf16(half.bf16_data(), x.f32(), n);
  cuda::bf16_to_f32(back.f32(), half.bf16_data(), n);
  bf16 want_half{};
  cpu::f32_to_bf16(&want_half, &v, 1);
  const float want_back = to_f32(want_half);
  std::vector<int64_t> positions = {0, 1, (int64_t(1) << 31) - 1, int64_t(1) << 31, n - 2, n - 1};
  for (int64_t i = (int64_t(1) << 31) + 1; i < n; i += 997) positions.push_back(i);
  int64_t wrong = 0;
  for (const int64_t i : positions) {
    bf16 h{};
    float f = 0;
    ASSERT_EQ(cudaMemcpy(&h, half.bf16_data() + i, 2, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(&f, back.f32() + i, 4, cudaMemcpyDeviceToHost), cudaSuccess);
    wrong += h.bits != want_half.bits || f != want_back;
  }
  EXPECT_EQ(wrong, 0) << "of " << positions.size() << " positions read back";
  const double sum = cuda::sum_squares(x.f32(), n), want_sum = double(n) * double(v) * double(v);
  const double relerr = std::abs(sum - want_sum) / want_sum;
  report("sum_squares.2^31+4099", "f32", relerr, kLimitF32);
}

TEST(CudaElementwise, U8ToF32NormalizedMatchesCpu) {
  ST_REQUIRE_GPU();
  const int64_t n = 1 << 20;
  // Bytes carried in an i32 tensor (there is no u8 dtype).
  Tensor bytes = Tensor::empty({n / 4}, DType::i32);
  auto* b = static_cast<uint8_t*>(bytes.raw());
  Rng rng(109);
  for (int64_t i = 0; i < n; ++i) b[i] = uint8_t(rng.below(256));
  const Tensor db = dev(bytes);
  const Tensor out = poisoned({n});
  cuda::u8_to_f32_normalized(out.f32(), static_cast<const uint8_t*>(db.raw()), n, 0.2860f, 0.3530f);
  const Tensor want = Tensor::empty({n});
  cpu::u8_to_f32_normalized(want.f32(), b, n, 0.2860f, 0.3530f);
  report("u8_to_f32_normalized", "f32", rel_error(out, want), kLimitF32);
}

// ---- activation -------------------------------------------------------------

TEST(CudaActivation, ReluForwardBackwardMatchCpu) {
  ST_REQUIRE_GPU();
  const int64_t n = 1000003;
  const Tensor x = random_host({n}, 201), g = random_host({n}, 202);
  const Tensor dx = dev(x), dg = dev(g);
  const Tensor out = poisoned({n});
  cuda::relu_forward(out.f32(), dx.f32(), n);
  const Tensor want = Tensor::empty({n});
  cpu::relu_forward(want.f32(), x.f32(), n);
  report("relu_forward", "f32", rel_error(out, want), kLimitF32);

  const Tensor din = poisoned({n});
  cuda::relu_backward(din.f32(), dg.f32(), out.f32(), n);
  const Tensor want_din = Tensor::empty({n});
  cpu::relu_backward(want_din.f32(), g.f32(), want.f32(), n);
  report("relu_backward", "f32", rel_error(din, want_din), kLimitF32);

  // In place: forward on its input, backward on dout.
  cuda::relu_forward(dx.f32(), dx.f32(), n);
  report("relu_forward", "f32", rel_error(dx, want), kLimitF32);
  cuda::relu_backward(dg.f32(), dg.f32(), out.f32(), n);
  report("relu_backward", "f32", rel_error(dg, want_din), kLimitF32);
}

TEST(CudaActivation, GeluForwardBackwardMatchCpu) {
  ST_REQUIRE_GPU();
  const int64_t n = 1000003;
  // [-12, 12): both tails of the sigmoid form (tiny outputs for x << 0).
  const Tensor x = random_host({n}, 203, -12.0f, 12.0f), g = random_host({n}, 204);
  const Tensor dx = dev(x), dg = dev(g);
  const Tensor out = poisoned({n});
  cuda::gelu_forward(out.f32(), dx.f32(), n);
  const Tensor want = Tensor::empty({n});
  cpu::gelu_forward(want.f32(), x.f32(), n);
  report("gelu_forward", "f32", rel_error(out, want), kLimitF32);

  const Tensor din = poisoned({n});
  cuda::gelu_backward(din.f32(), dg.f32(), dx.f32(), n);
  const Tensor want_din = Tensor::empty({n});
  cpu::gelu_backward(want_din.f32(), g.f32(), x.f32(), n);
  report("gelu_backward", "f32", rel_error(din, want_din), kLimitF32);

  // In place (din == dout, then out == in).
  cuda::gelu_backward(dg.f32(), dg.f32(), dx.f32(), n);
  report("gelu_backward", "f32", rel_error(dg, want_din), kLimitF32);
  cuda::gelu_forward(dx.f32(), dx.f32(), n);
  report("gelu_forward", "f32", rel_error(dx, want), kLimitF32);
}

// ---- optimizer_update -------------------------------------------------------

// A step's scalars (kernels::SgdStep, AdamWStep) on the device, written as
// the optimizers write them: by cuda::store_floats in stream order.
template <typename Step>
Tensor device_step(const Step& step) {
  const Tensor t = poisoned({Step::kFloats});
  const auto f = step.floats();
  cuda::store_floats(t.f32(), f.data(), Step::kFloats);
  return t;
}

void check_sgd(const cpu::SgdParams& hp, bool first_step, uint64_t seed) {
  const int64_t n = 1000003;
  const Tensor p = random_host({n}, seed), g = random_host({n}, seed + 1), buf = random_host({n}, seed + 2);
  const Tensor dp = dev(p), dg = dev(g), dbuf = dev(buf);
  const bool with_buf = hp.momentum != 0.0f;
  const Tensor step = device_step(kernels::SgdStep::of(hp, first_step));
  cuda::sgd_update(dp.f32(), dg.f32(), with_buf ? dbuf.f32() : nullptr, n, hp, step.f32());
  const Tensor wp = clone_host(p), wbuf = clone_host(buf);
  cpu::sgd_update(wp.f32(), g.f32(), with_buf ? wbuf.f32() : nullptr, n, hp, first_step);
  report("sgd_update", "f32", rel_error(dp, wp), kLimitF32);
  if (with_buf) report("sgd_update.momentum_buf", "f32", rel_error(dbuf, wbuf), kLimitF32);
}

TEST(CudaOptimizer, SgdMatchesCpuInEveryMode) {
  ST_REQUIRE_GPU();
  check_sgd({.lr = 0.05f, .momentum = 0.0f, .dampening = 0.0f, .weight_decay = 1e-2f}, false, 301);
  check_sgd({.lr = 0.05f, .momentum = 0.9f, .dampening = 0.0f, .weight_decay = 1e-2f}, true, 311);
  check_sgd({.lr = 0.05f, .momentum = 0.9f, .dampening = 0.1f, .weight_decay = 1e-4f}, false, 321);
  check_sgd({.lr = 0.05f, .momentum = 0.9f, .dampening = 0.0f, .weight_decay = 1e-2f, .nesterov = true}, false, 331);
  check_sgd({.lr = 0.05f, .momentum = 0.8f, .dampening = 0.0f, .weight_decay = 0.0f, .nesterov = true}, true, 341);
}

TEST(CudaOptimizer, SgdWithoutBufferIsAnErrorAsOnCpu) {
  ST_REQUIRE_GPU();
  const Tensor p = dev(random_host({16}, 351)), g = dev(random_host({16}, 352));
  cpu::SgdParams hp;
  hp.momentum = 0.9f;
  std::string cpu_message, gpu_message;
  try {
    std::vector<float> hp_host(16, 1.0f);
    cpu::sgd_update(hp_host.data(), hp_host.data(), nullptr, 16, hp, false);
  } catch (const Error& e) {
    cpu_message = e.what();
  }
  try {
    const Tensor step = device_step(kernels::SgdStep::of(hp, false));
    cuda::sgd_update(p.f32(), g.f32(), nullptr, 16, hp, step.f32());
  } catch (const Error& e) {
    gpu_message = e.what();
  }
  EXPECT_FALSE(cpu_message.empty());
  EXPECT_EQ(gpu_message, cpu_message);
}

TEST(CudaOptimizer, AdamWMatchesCpu) {
  ST_REQUIRE_GPU();
  const int64_t n = 1000003;
  const cpu::AdamWParams hp{.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  for (const int64_t step : {int64_t(1), int64_t(7), int64_t(1000)}) {
    const uint64_t seed = 400 + uint64_t(step);
    const Tensor p = random_host({n}, seed), g = random_host({n}, seed + 1, -0.1f, 0.1f),
                 m = random_host({n}, seed + 2, -0.01f, 0.01f), v = random_host({n}, seed + 3, 0.0f, 1e-3f);
    const Tensor dp = dev(p), dg = dev(g), dm = dev(m), dv = dev(v);
    const Tensor scalars = device_step(kernels::AdamWStep::of(hp, step));
    cuda::adamw_update(dp.f32(), dg.f32(), dm.f32(), dv.f32(), n, hp, scalars.f32());
    const Tensor wp = clone_host(p), wm = clone_host(m), wv = clone_host(v);
    cpu::adamw_update(wp.f32(), g.f32(), wm.f32(), wv.f32(), n, hp, step);
    report("adamw_update", "f32", rel_error(dp, wp), kLimitF32);
    report("adamw_update.m", "f32", rel_error(dm, wm), kLimitF32);
    report("adamw_update.v", "f32", rel_error(dv, wv), kLimitF32);
  }
}

// The update captured once into a CUDA graph, then replayed after each
// step's scalars were stored outside it (as the trainer does with
// runtime.cuda_graphs): four steps at changing learning rates give the
// bits of four eager CPU steps. Scalars baked into the graph would repeat
// the captured step's rate and bias corrections.
TEST(CudaOptimizer, CapturedAdamWReplaysWithEachStepsScalars) {
  ST_REQUIRE_GPU();
  const int64_t n = 4099;
  cpu::AdamWParams hp{.lr = 0.0f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  const Tensor p = random_host({n}, 431), g = random_host({n}, 432, -0.1f, 0.1f);
  const Tensor dp = dev(p), dg = dev(g), dm = dev(Tensor::zeros({n})), dv = dev(Tensor::zeros({n}));
  const Tensor scalars = device_step(kernels::AdamWStep{});
  std::string why;
  const GpuGraph graph = capture_gpu_graph(
      [&] { cuda::adamw_update(dp.f32(), dg.f32(), dm.f32(), dv.f32(), n, hp, scalars.f32()); }, &why);
  ASSERT_TRUE(graph) << why;
  const Tensor wp = clone_host(p), wm = Tensor::zeros({n}), wv = Tensor::zeros({n});
  const float rates[] = {1e-3f, 3e-3f, 2e-3f, 5e-4f};
  for (int64_t step = 1; step <= 4; ++step) {
    hp.lr = rates[step - 1];
    const auto f = kernels::AdamWStep::of(hp, step).floats();
    cuda::store_floats(scalars.f32(), f.data(), int(f.size()));
    launch_gpu_graph(graph);
    cpu::adamw_update(wp.f32(), g.f32(), wm.f32(), wv.f32(), n, hp, step);
  }
  synchronize_gpu();
  const Tensor got = to_host(dp);
  EXPECT_EQ(std::memcmp(got.raw(), wp.raw(), size_t(n) * sizeof(float)), 0) << "rel. " << rel_error(dp, wp);
  const Tensor got_v = to_host(dv);
  EXPECT_EQ(std::memcmp(got_v.raw(), wv.raw(), size_t(n) * sizeof(float)), 0);
}

// ---- cross_entropy ----------------------------------------------------------

TEST(CudaCrossEntropy, ForwardMatchesCpu) {
  ST_REQUIRE_GPU();
  for (const int64_t C : {int64_t(768), int64_t(10), int64_t(50257)}) {
    const int64_t N = C > 1000 ? 64 : 512;
    const uint64_t seed = 500 + uint64_t(C);
    const Tensor x = random_host({N, C}, seed, -6.0f, 6.0f);
    const auto y = random_labels(N, C, seed + 1);
    const Tensor dx = dev(x);
    const double got = cuda::softmax_xent_forward(dx.f32(), y.data(), N, C);
    const double want = cpu::softmax_xent_forward(x.f32(), y.data(), N, C, nullptr);
    report("softmax_xent_forward", "f32", rel_error_scalar(got, want), kLimitF32);
  }
}

TEST(CudaCrossEntropy, FusedMatchesCpuAlsoInPlace) {
  ST_REQUIRE_GPU();
  const int64_t N = 512, C = 768;
  const float scale = 1.0f / float(N);
  const Tensor x = random_host({N, C}, 601, -6.0f, 6.0f);
  const auto y = random_labels(N, C, 602);
  const Tensor dx = dev(x);
  const Tensor dlogits = poisoned({N, C});
  const double got = cuda::softmax_xent_fused(dlogits.f32(), dx.f32(), y.data(), N, C, scale);
  const Tensor want = Tensor::empty({N, C});
  const double want_loss = cpu::softmax_xent_fused(want.f32(), x.f32(), y.data(), N, C, scale);
  report("softmax_xent_fused.loss", "f32", rel_error_scalar(got, want_loss), kLimitF32);
  report("softmax_xent_fused", "f32", rel_error(dlogits, want), kLimitF32);
  // In place: the gradient overwrites the logits.
  const double got_in_place = cuda::softmax_xent_fused(dx.f32(), dx.f32(), y.data(), N, C, scale);
  report("softmax_xent_fused.loss", "f32", rel_error_scalar(got_in_place, want_loss), kLimitF32);
  report("softmax_xent_fused", "f32", rel_error(dx, want), kLimitF32);
}

// The training step's form: device labels, a loss per row on the device.
// A bad label gives that row NaN and leaves its gradient row alone.
TEST(CudaCrossEntropy, FusedRowsMatchCpu) {
  ST_REQUIRE_GPU();
  for (const int64_t C : {int64_t(10), int64_t(256), int64_t(50257)}) {
    const int64_t N = C > 1000 ? 64 : 2048;
    const float scale = 1.0f / float(N);
    const Tensor x = random_host({N, C}, 650 + uint64_t(C), -6.0f, 6.0f);
    const auto y = random_labels(N, C, 651 + uint64_t(C));
    Tensor labels = Tensor::empty({N}, DType::i32);
    std::copy(y.begin(), y.end(), labels.i32());
    const Tensor dlogits = poisoned({N, C}), rows = poisoned({N});
    cuda::softmax_xent_fused_rows(dlogits.f32(), dev(x).f32(), to_device(labels, gpu()).i32(), N, C, scale, rows.f32());
    const Tensor want = Tensor::empty({N, C}), want_rows = Tensor::empty({N});
    cpu::softmax_xent_fused_rows(want.f32(), x.f32(), y.data(), N, C, scale, want_rows.f32());
    report("softmax_xent_fused_rows.loss", "f32", rel_error(rows, want_rows), kLimitF32);
    report("softmax_xent_fused_rows", "f32", rel_error(dlogits, want), kLimitF32);
  }
  const int64_t N = 4, C = 5;
  const Tensor x = random_host({N, C}, 660);
  Tensor labels = Tensor::empty({N}, DType::i32);
  const int32_t y[] = {1, 7, 0, -2};
  std::copy(y, y + N, labels.i32());
  const Tensor dlogits = poisoned({N, C}), rows = poisoned({N});
  cuda::softmax_xent_fused_rows(dlogits.f32(), dev(x).f32(), to_device(labels, gpu()).i32(), N, C, 1.0f, rows.f32());
  const Tensor r = to_host(rows), d = to_host(dlogits);
  EXPECT_TRUE(std::isfinite(r.f32()[0]) && std::isfinite(r.f32()[2]));
  EXPECT_TRUE(std::isnan(r.f32()[1]) && std::isnan(r.f32()[3]));
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_TRUE(std::isfinite(d.f32()[0 * C + c]));
    EXPECT_TRUE(std::isnan(d.f32()[1 * C + c]));  // still the poison: not written
  }
}

TEST(CudaCrossEntropy, CountCorrectIsExactWithTies) {
  ST_REQUIRE_GPU();
  const int64_t N = 512, C = 256;
  // Integer logits in [-3, 3]: many rows have several equal maxima.
  Tensor x = random_host({N, C}, 701, -3.0f, 3.0f);
  for (float& v : x.f32_span()) v = std::round(v);
  auto y = random_labels(N, C, 702);
  for (int64_t n = 0; n < N; ++n) {
    const float* row = x.f32() + n * C;
    int64_t first = 0, last = 0;
    for (int64_t i = 1; i < C; ++i) {
      if (row[i] > row[first]) first = i;
      if (row[i] >= row[last]) last = i;
    }
    // A third of the rows labelled with the first maximum (correct), a third
    // with the last one (wrong when tied), the rest at random.
    if (n % 3 == 0) y[size_t(n)] = int32_t(first);
    if (n % 3 == 1) y[size_t(n)] = int32_t(last);
  }
  const Tensor dx = dev(x);
  const int64_t got = cuda::count_correct(dx.f32(), y.data(), N, C);
  const int64_t want = cpu::count_correct(x.f32(), y.data(), N, C);
  EXPECT_EQ(got, want);
  EXPECT_GT(want, N / 3 - 1);
  report("count_correct", "f32", rel_error_scalar(double(got), double(want)), kLimitF32);
}

TEST(CudaCrossEntropy, BadLabelIsTheCpuError) {
  ST_REQUIRE_GPU();
  const int64_t N = 8, C = 5;
  const Tensor x = random_host({N, C}, 801);
  const Tensor dx = dev(x);
  std::vector<int32_t> y = {0, 1, 2, 3, 4, 5, 0, -1};
  std::string cpu_message, gpu_message;
  try {
    cpu::softmax_xent_forward(x.f32(), y.data(), N, C, nullptr);
  } catch (const Error& e) {
    cpu_message = e.what();
  }
  try {
    cuda::softmax_xent_forward(dx.f32(), y.data(), N, C);
  } catch (const Error& e) {
    gpu_message = e.what();
  }
  EXPECT_FALSE(cpu_message.empty());
  EXPECT_EQ(gpu_message, cpu_message);
  EXPECT_THROW(cuda::count_correct(dx.f32(), y.data(), N, C), Error);
}

// ---- layernorm --------------------------------------------------------------

TEST(CudaLayerNorm, ForwardMatchesCpu) {
  ST_REQUIRE_GPU();
  const int64_t N = 512, C = 768;
  // An offset mean, so that centering matters.
  const Tensor x = random_host({N, C}, 901, 2.0f, 4.0f);
  const Tensor w = random_host({C}, 902, 0.5f, 1.5f), b = random_host({C}, 903);
  const Tensor dx = dev(x), dw = dev(w), db = dev(b);
  const Tensor out = poisoned({N, C}), mean = poisoned({N}), rstd = poisoned({N});
  cuda::layernorm_forward(out.f32(), mean.f32(), rstd.f32(), dx.f32(), dw.f32(), db.f32(), N, C, 1e-5f);
  const Tensor wout = Tensor::empty({N, C}), wmean = Tensor::empty({N}), wrstd = Tensor::empty({N});
  cpu::layernorm_forward(wout.f32(), wmean.f32(), wrstd.f32(), x.f32(), w.f32(), b.f32(), N, C, 1e-5f);
  report("layernorm_forward", "f32", rel_error(out, wout), kLimitF32);
  report("layernorm_forward.mean", "f32", rel_error(mean, wmean), kLimitF32);
  report("layernorm_forward.rstd", "f32", rel_error(rstd, wrstd), kLimitF32);
}

// Two shapes: rows a multiple of the parameter gradients' row chunks and
// channels of their column blocks, and neither.
TEST(CudaLayerNorm, BackwardMatchesCpuOverwritingAndAccumulating) {
  ST_REQUIRE_GPU();
  for (const auto& [N, C] : {std::pair<int64_t, int64_t>{512, 768}, {1000, 100}}) {
    const Tensor x = random_host({N, C}, 1001, -2.0f, 3.0f);
    const Tensor w = random_host({C}, 1002, 0.5f, 1.5f), b = random_host({C}, 1003);
    const Tensor g = random_host({N, C}, 1004);
    // Mean and rstd from the CPU forward, used by both backward passes.
    const Tensor out = Tensor::empty({N, C}), mean = Tensor::empty({N}), rstd = Tensor::empty({N});
    cpu::layernorm_forward(out.f32(), mean.f32(), rstd.f32(), x.f32(), w.f32(), b.f32(), N, C, 1e-5f);
    const Tensor dx = dev(x), dw_in = dev(w), dg = dev(g), dmean = dev(mean), drstd = dev(rstd);
    for (const bool accumulate : {false, true}) {
      const uint64_t seed = accumulate ? 1010 : 1020;
      const Tensor dw0 = random_host({C}, seed), db0 = random_host({C}, seed + 1);
      const Tensor din = poisoned({N, C});
      const Tensor dweight = accumulate ? dev(dw0) : poisoned({C});
      const Tensor dbias = accumulate ? dev(db0) : poisoned({C});
      cuda::layernorm_backward(din.f32(), dweight.f32(), dbias.f32(), dg.f32(), dx.f32(), dw_in.f32(), dmean.f32(),
                               drstd.f32(), N, C, accumulate);
      const Tensor wdin = Tensor::empty({N, C}), wdw = clone_host(dw0), wdb = clone_host(db0);
      cpu::layernorm_backward(wdin.f32(), wdw.f32(), wdb.f32(), g.f32(), x.f32(), w.f32(), mean.f32(), rstd.f32(), N, C,
                              accumulate);
      report("layernorm_backward.din", "f32", rel_error(din, wdin), kLimitF32);
      report("layernorm_backward.dweight", "f32", rel_error(dweight, wdw), kLimitF32);
      report("layernorm_backward.dbias", "f32", rel_error(dbias, wdb), kLimitF32);
    }
  }
}

// The fused residual kernels against the CPU's fused kernels (the report
// rows, kLimitF32: the row sums add in another fixed order, as above), and
// against the unfused CUDA sequence they replace (cuda::add and the plain
// layernorm kernels): the same additions in the same order, so the same bits.
// Shapes as above; the sum, or din, written separately or in place over each
// operand it may alias.
int64_t bit_mismatches(const Tensor& got_any, const Tensor& want_any) {
  const Tensor got = to_host(got_any), want = to_host(want_any);
  EXPECT_EQ(got.numel(), want.numel());
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) bad += std::memcmp(got.f32() + i, want.f32() + i, sizeof(float)) != 0;
  return bad;
}

TEST(CudaLayerNorm, ResidualForwardMatchesCpuAndTheUnfusedBits) {
  ST_REQUIRE_GPU();
  for (const auto& [N, C] : {std::pair<int64_t, int64_t>{512, 768}, {1000, 100}}) {
    const Tensor a = random_host({N, C}, 1031, -2.0f, 3.0f), b = random_host({N, C}, 1032, 1.0f, 2.0f);
    const Tensor w = random_host({C}, 1033, 0.5f, 1.5f), bias = random_host({C}, 1034);
    const Tensor da = dev(a), db = dev(b), dw = dev(w), dbias = dev(bias);
    const Tensor wsum = Tensor::empty({N, C}), wout = Tensor::empty({N, C});
    const Tensor wmean = Tensor::empty({N}), wrstd = Tensor::empty({N});
    cpu::residual_layernorm_forward(wsum.f32(), wout.f32(), wmean.f32(), wrstd.f32(), a.f32(), b.f32(), w.f32(),
                                    bias.f32(), N, C, 1e-5f);
    // The unfused CUDA sequence.
    const Tensor usum = poisoned({N, C}), uout = poisoned({N, C}), umean = poisoned({N}), urstd = poisoned({N});
    cuda::add(usum.f32(), da.f32(), db.f32(), N * C);
    cuda::layernorm_forward(uout.f32(), umean.f32(), urstd.f32(), usum.f32(), dw.f32(), dbias.f32(), N, C, 1e-5f);
    for (const int alias : {0, 1, 2}) {  // sum separate, over a, over b
      const Tensor sum = alias == 1 ? dev(a) : alias == 2 ? dev(b) : poisoned({N, C});
      const Tensor out = poisoned({N, C}), mean = poisoned({N}), rstd = poisoned({N});
      cuda::residual_layernorm_forward(sum.f32(), out.f32(), mean.f32(), rstd.f32(), alias == 1 ? sum.f32() : da.f32(),
                                       alias == 2 ? sum.f32() : db.f32(), dw.f32(), dbias.f32(), N, C, 1e-5f);
      report("residual_layernorm_forward.sum", "f32", rel_error(sum, wsum), kLimitF32);
      report("residual_layernorm_forward", "f32", rel_error(out, wout), kLimitF32);
      report("residual_layernorm_forward.mean", "f32", rel_error(mean, wmean), kLimitF32);
      report("residual_layernorm_forward.rstd", "f32", rel_error(rstd, wrstd), kLimitF32);
      EXPECT_EQ(bit_mismatches(sum, usum), 0) << N << "x" << C << " alias " << alias;
      EXPECT_EQ(bit_mismatches(out, uout), 0) << N << "x" << C << " alias " << alias;
      EXPECT_EQ(bit_mismatches(mean, umean), 0) << N << "x" << C << " alias " << alias;
      EXPECT_EQ(bit_mismatches(rstd, urstd), 0) << N << "x" << C << " alias " << alias;
    }
  }
}

TEST(CudaLayerNorm, BackwardAddMatchesCpuAndTheUnfusedBits) {
  ST_REQUIRE_GPU();
  for (const auto& [N, C] : {std::pair<int64_t, int64_t>{512, 768}, {1000, 100}}) {
    const Tensor x = random_host({N, C}, 1041, -2.0f, 3.0f);
    const Tensor w = random_host({C}, 1042, 0.5f, 1.5f), b = random_host({C}, 1043);
    const Tensor g = random_host({N, C}, 1044), r = random_host({N, C}, 1045);
    const Tensor out = Tensor::empty({N, C}), mean = Tensor::empty({N}), rstd = Tensor::empty({N});
    cpu::layernorm_forward(out.f32(), mean.f32(), rstd.f32(), x.f32(), w.f32(), b.f32(), N, C, 1e-5f);
    const Tensor dx = dev(x), dw_in = dev(w), dg = dev(g), dr = dev(r), dmean = dev(mean), drstd = dev(rstd);
    for (const bool accumulate : {false, true}) {
      const uint64_t seed = accumulate ? 1050 : 1060;
      const Tensor dw0 = random_host({C}, seed), db0 = random_host({C}, seed + 1);
      const Tensor wdin = Tensor::empty({N, C}), wdw = clone_host(dw0), wdb = clone_host(db0);
      cpu::layernorm_backward_add(wdin.f32(), wdw.f32(), wdb.f32(), g.f32(), x.f32(), w.f32(), mean.f32(), rstd.f32(),
                                  r.f32(), N, C, accumulate);
      // The unfused CUDA sequence.
      const Tensor udin = poisoned({N, C});
      const Tensor udw = accumulate ? dev(dw0) : poisoned({C}), udb = accumulate ? dev(db0) : poisoned({C});
      cuda::layernorm_backward(udin.f32(), udw.f32(), udb.f32(), dg.f32(), dx.f32(), dw_in.f32(), dmean.f32(),
                               drstd.f32(), N, C, accumulate);
      cuda::add(udin.f32(), udin.f32(), dr.f32(), N * C);
      for (const bool in_place : {false, true}) {  // din separate, or din over dresidual
        const Tensor din = in_place ? dev(r) : poisoned({N, C});
        const Tensor dweight = accumulate ? dev(dw0) : poisoned({C});
        const Tensor dbias = accumulate ? dev(db0) : poisoned({C});
        cuda::layernorm_backward_add(din.f32(), dweight.f32(), dbias.f32(), dg.f32(), dx.f32(), dw_in.f32(),
                                     dmean.f32(), drstd.f32(), in_place ? din.f32() : dr.f32(), N, C, accumulate);
        report("layernorm_backward_add.din", "f32", rel_error(din, wdin), kLimitF32);
        report("layernorm_backward_add.dweight", "f32", rel_error(dweight, wdw), kLimitF32);
        report("layernorm_backward_add.dbias", "f32", rel_error(dbias, wdb), kLimitF32);
        EXPECT_EQ(bit_mismatches(din, udin), 0) << N << "x" << C << " in place " << in_place;
        EXPECT_EQ(bit_mismatches(dweight, udw), 0) << N << "x" << C << " in place " << in_place;
        EXPECT_EQ(bit_mismatches(dbias, udb), 0) << N << "x" << C << " in place " << in_place;
      }
    }
  }
}

// ---- embedding --------------------------------------------------------------

TEST(CudaEmbedding, ForwardMatchesCpu) {
  ST_REQUIRE_GPU();
  const int64_t N = 4096, V = 256, C = 768;
  const Tensor table = random_host({V, C}, 1101);
  const Tensor ids = random_ids(N, V, 1102);
  const Tensor dtable = dev(table), dids = dev(ids);
  const Tensor out = poisoned({N, C});
  cuda::embedding_forward(out.f32(), dids.i32(), dtable.f32(), N, V, C);
  const Tensor want = Tensor::empty({N, C});
  cpu::embedding_forward(want.f32(), ids.i32(), table.f32(), N, V, C);
  report("embedding_forward", "f32", rel_error(out, want), kLimitF32);
}

// A bad id is not waited for at the call: the kernels skip it (its row reads
// as zeros, adds no gradient) and the host's next wait for the compute
// stream raises the CPU's Error, once.
TEST(CudaEmbedding, BadIdIsTheCpuErrorAtTheNextWait) {
  ST_REQUIRE_GPU();
  const int64_t N = 1000, V = 256, C = 64;
  const Tensor table = random_host({V, C}, 1201);
  Tensor ids = random_ids(N, V, 1202);
  ids.i32()[700] = 256;  // the first bad position
  ids.i32()[900] = -3;
  const Tensor dtable = dev(table), dids = dev(ids);
  const Tensor out = poisoned({N, C});
  std::string cpu_message;
  try {
    cpu::check_embedding_ids(ids.i32(), N, V);
  } catch (const Error& e) {
    cpu_message = e.what();
  }
  EXPECT_FALSE(cpu_message.empty());
  const auto raised_at_wait = [&](const char* what) {
    std::string gpu_message;
    try {
      cuda::sync_compute();
    } catch (const Error& e) {
      gpu_message = e.what();
    }
    EXPECT_EQ(gpu_message, cpu_message) << what;
    EXPECT_NO_THROW(cuda::sync_compute()) << what << ": raised once";
  };
  EXPECT_NO_THROW(cuda::embedding_forward(out.f32(), dids.i32(), dtable.f32(), N, V, C));
  raised_at_wait("forward");
  // What the CPU computes with the bad rows zero (and skipped below).
  Tensor good = clone_host(ids);
  good.i32()[700] = good.i32()[900] = 0;
  Tensor want = Tensor::empty({N, C});
  cpu::embedding_forward(want.f32(), good.i32(), table.f32(), N, V, C);
  for (const int64_t n : {int64_t(700), int64_t(900)}) std::fill_n(want.f32() + n * C, C, 0.0f);
  report("embedding_forward.bad_id", "f32", rel_error(out, want), kLimitF32);

  const Tensor dout = random_host({N, C}, 1203);
  EXPECT_NO_THROW(cuda::embedding_backward(dtable.f32(), dev(dout).f32(), dids.i32(), N, V, C, true));
  raised_at_wait("backward");
  Tensor dout_good = clone_host(dout);
  for (const int64_t n : {int64_t(700), int64_t(900)}) std::fill_n(dout_good.f32() + n * C, C, 0.0f);
  Tensor want_table = clone_host(table);
  cpu::embedding_backward(want_table.f32(), dout_good.f32(), good.i32(), N, V, C, true);
  report("embedding_backward.bad_id", "f32", rel_error(dtable, want_table), kLimitF32);

  // The training step's one wait, for the read-back of its losses, raises it too.
  EXPECT_NO_THROW(cuda::embedding_forward(out.f32(), dids.i32(), dtable.f32(), N, V, C));
  const Tensor row_host = Tensor::empty_pinned({C});
  read_back_async(row_host, out.view(0, {C}));
  std::string at_read_back;
  try {
    wait_read_back(out.device());
  } catch (const Error& e) {
    at_read_back = e.what();
  }
  EXPECT_EQ(at_read_back, cpu_message);
  EXPECT_NO_THROW(cuda::sync_compute());
}

TEST(CudaEmbedding, BackwardMatchesCpuOverwritingAndAccumulating) {
  ST_REQUIRE_GPU();
  const int64_t N = 4096, V = 256, C = 768;
  const Tensor dout = random_host({N, C}, 1301);
  const Tensor ids = random_ids(N, V - 6, 1302);  // the last rows get no ids
  const Tensor ddout = dev(dout), dids = dev(ids);
  for (const bool accumulate : {false, true}) {
    const Tensor t0 = random_host({V, C}, accumulate ? 1310 : 1320);
    const Tensor dtable = accumulate ? dev(t0) : poisoned({V, C});
    cuda::embedding_backward(dtable.f32(), ddout.f32(), dids.i32(), N, V, C, accumulate);
    const Tensor want = clone_host(t0);
    cpu::embedding_backward(want.f32(), dout.f32(), ids.i32(), N, V, C, accumulate);
    report("embedding_backward", "f32", rel_error(dtable, want), kLimitF32);
  }
}

// A GPT-2 vocabulary and context: the sorted backward gives the CPU's bits
// (same order of additions per element) with most ids repeated many times
// (half the tokens from 64 frequent ids) and most rows named by no token.
TEST(CudaEmbedding, BackwardAtGpt2VocabularyIsTheCpusBits) {
  ST_REQUIRE_GPU();
  const int64_t N = 8 * 1024, V = 50257, C = 768;
  const Tensor dout = random_host({N, C}, 1501);
  Tensor ids = random_ids(N, V, 1502);
  for (int64_t n = 0; n < N; n += 2) ids.i32()[n] %= 64;
  const Tensor ddout = dev(dout), dids = dev(ids);
  for (const bool accumulate : {false, true}) {
    const Tensor t0 = random_host({V, C}, accumulate ? 1510 : 1520);
    const Tensor dtable = accumulate ? dev(t0) : poisoned({V, C});
    cuda::embedding_backward(dtable.f32(), ddout.f32(), dids.i32(), N, V, C, accumulate);
    const Tensor got = to_host(dtable);
    const Tensor want = clone_host(t0);
    cpu::embedding_backward(want.f32(), dout.f32(), ids.i32(), N, V, C, accumulate);
    report("embedding_backward.vocab50257", "f32", rel_error(dtable, want), kLimitF32);
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0) << "accumulate " << accumulate;
  }
}

TEST(CudaEmbedding, PositionAddAndBackwardMatchCpu) {
  ST_REQUIRE_GPU();
  const int64_t B = 8, T = 256, C = 768, rows = 300;
  const Tensor out0 = random_host({B, T, C}, 1401), table = random_host({rows, C}, 1402);
  const Tensor dout = random_host({B, T, C}, 1403);
  const Tensor dout0 = dev(out0), dtable = dev(table), ddout = dev(dout);
  cuda::position_embedding_add(dout0.f32(), dtable.f32(), B, T, C);
  const Tensor want = clone_host(out0);
  cpu::position_embedding_add(want.f32(), table.f32(), B, T, C);
  report("position_embedding_add", "f32", rel_error(dout0, want), kLimitF32);

  for (const bool accumulate : {false, true}) {
    const Tensor t0 = random_host({rows, C}, accumulate ? 1410 : 1420);
    const Tensor dt = accumulate ? dev(t0) : poisoned({rows, C});
    cuda::position_embedding_backward(dt.f32(), ddout.f32(), B, T, C, rows, accumulate);
    const Tensor wt = clone_host(t0);
    cpu::position_embedding_backward(wt.f32(), dout.f32(), B, T, C, rows, accumulate);
    report("position_embedding_backward", "f32", rel_error(dt, wt), kLimitF32);
  }
}

// ---- pool -------------------------------------------------------------------

void check_maxpool(const cpu::Pool2dShape& s, uint64_t seed) {
  const int64_t OH = s.OH(), OW = s.OW();
  // Values rounded to a coarse grid: windows with tied maxima.
  Tensor x = random_host({s.B, s.C, s.H, s.W}, seed, -4.0f, 4.0f);
  for (float& v : x.f32_span()) v = std::round(v * 2.0f) / 2.0f;
  const Tensor g = random_host({s.B, s.C, OH, OW}, seed + 1);
  const Tensor dx = dev(x), dg = dev(g);
  const Tensor out = poisoned({s.B, s.C, OH, OW});
  const Tensor argmax = poisoned({s.B, s.C, OH, OW}, DType::i32);
  cuda::maxpool2d_forward(out.f32(), argmax.i32(), dx.f32(), s);
  const Tensor wout = Tensor::empty({s.B, s.C, OH, OW});
  const Tensor wargmax = Tensor::empty({s.B, s.C, OH, OW}, DType::i32);
  cpu::maxpool2d_forward(wout.f32(), wargmax.i32(), x.f32(), s);
  report("maxpool2d_forward", "f32", rel_error(out, wout), kLimitF32);
  EXPECT_EQ(i32_mismatches(argmax, wargmax), 0) << "arg-max indices differ from the CPU's";

  const Tensor din = poisoned({s.B, s.C, s.H, s.W});
  const Tensor dargmax = dev(wargmax);
  cuda::maxpool2d_backward(din.f32(), dg.f32(), dargmax.i32(), s);
  const Tensor wdin = Tensor::empty({s.B, s.C, s.H, s.W});
  cpu::maxpool2d_backward(wdin.f32(), g.f32(), wargmax.i32(), s);
  report("maxpool2d_backward", "f32", rel_error(din, wdin), kLimitF32);
}

TEST(CudaPool, MaxPoolMatchesCpu) {
  ST_REQUIRE_GPU();
  check_maxpool({.B = 32, .C = 16, .H = 28, .W = 28, .K = 2, .stride = 2}, 1501);
  check_maxpool({.B = 16, .C = 8, .H = 27, .W = 29, .K = 2, .stride = 2}, 1511);  // odd edges
  check_maxpool({.B = 16, .C = 8, .H = 28, .W = 28, .K = 3, .stride = 2}, 1521);  // overlapping
  check_maxpool({.B = 8, .C = 4, .H = 15, .W = 17, .K = 3, .stride = 1}, 1531);
}

#else

TEST(CudaKernels, NotBuilt) { GTEST_SKIP() << "skipped: no CUDA device (CUDA backend not built)"; }

#endif

}  // namespace
}  // namespace shardtrain
