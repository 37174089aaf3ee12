// Memory-bound kernels around the GEMMs, in GB/s of bytes read + written per
// call (compare with ~12-16 GB/s for a plain large copy on one core; buffers
// that fit in cache can go faster). Everything here runs every step, so it
// has to stay small next to the GEMM time of the step.
#include "kernels/cpu/activation.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/optimizer_update.h"
#include "runtime/core/rng.h"

#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

namespace shardtrain::cpu {
namespace {

std::vector<float> random_buffer(int64_t n, uint64_t key, float lo = -1.0f, float hi = 1.0f) {
  Rng rng(key);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

// The MLP 784-1024-1024-10's parameter count (weights and biases).
constexpr int64_t kMlpParams = 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10;

void set_bytes(benchmark::State& state, double bytes_per_iteration) {
  state.SetBytesProcessed(int64_t(bytes_per_iteration * double(state.iterations())));
}

void BM_SoftmaxXentFused(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1);
  const auto logits = random_buffer(N * C, 1, -5.0f, 5.0f);
  std::vector<float> dlogits(static_cast<size_t>(N * C));
  std::vector<int32_t> labels(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) labels[size_t(n)] = int32_t((n * 7919) % C);
  for (auto _ : state) {
    benchmark::DoNotOptimize(softmax_xent_fused(dlogits.data(), logits.data(), labels.data(), N, C, 1.0f / float(N)));
    benchmark::ClobberMemory();
  }
  set_bytes(state, 4.0 * double(2 * N * C + N));  // logits in, dlogits out, labels
}
BENCHMARK(BM_SoftmaxXentFused)->Args({128, 10})->Args({64, 50257})->ArgNames({"N", "C"});

void BM_LayerNormForward(benchmark::State& state) {
  const int64_t N = 1024, C = 768;
  const auto in = random_buffer(N * C, 2), w = random_buffer(C, 3), b = random_buffer(C, 4);
  std::vector<float> out(static_cast<size_t>(N * C)), mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
  for (auto _ : state) {
    layernorm_forward(out.data(), mean.data(), rstd.data(), in.data(), w.data(), b.data(), N, C, 1e-5f);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 4.0 * double(2 * N * C + 2 * C + 2 * N));
}
BENCHMARK(BM_LayerNormForward);

void BM_LayerNormBackward(benchmark::State& state) {
  const int64_t N = 1024, C = 768;
  const auto in = random_buffer(N * C, 5), w = random_buffer(C, 6), b = random_buffer(C, 7);
  const auto dout = random_buffer(N * C, 8);
  std::vector<float> out(static_cast<size_t>(N * C)), mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N)),
      din(static_cast<size_t>(N * C)), dw(static_cast<size_t>(C)), db(static_cast<size_t>(C));
  layernorm_forward(out.data(), mean.data(), rstd.data(), in.data(), w.data(), b.data(), N, C, 1e-5f);
  for (auto _ : state) {
    layernorm_backward(din.data(), dw.data(), db.data(), dout.data(), in.data(), w.data(), mean.data(), rstd.data(), N,
                       C, false);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 4.0 * double(3 * N * C + 3 * C + 2 * N));  // dout, in, din; w, dw, db
}
BENCHMARK(BM_LayerNormBackward);

// Activations at the size of the MLP's hidden activations at batch 128 (in
// cache) and at 16M elements (from memory).
void BM_ReluForward(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto in = random_buffer(n, 9);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    relu_forward(out.data(), in.data(), n);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 8.0 * double(n));
}
BENCHMARK(BM_ReluForward)->Arg(128 * 1024)->Arg(1 << 24);

void BM_ReluBackward(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto out = random_buffer(n, 10), dout = random_buffer(n, 11);
  std::vector<float> din(static_cast<size_t>(n));
  for (auto _ : state) {
    relu_backward(din.data(), dout.data(), out.data(), n);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 12.0 * double(n));
}
BENCHMARK(BM_ReluBackward)->Arg(128 * 1024)->Arg(1 << 24);

void BM_GeluForward(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto in = random_buffer(n, 12, -4.0f, 4.0f);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    gelu_forward(out.data(), in.data(), n);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 8.0 * double(n));
}
BENCHMARK(BM_GeluForward)->Arg(128 * 1024)->Arg(1 << 24);

void BM_GeluBackward(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto in = random_buffer(n, 13, -4.0f, 4.0f), dout = random_buffer(n, 14);
  std::vector<float> din(static_cast<size_t>(n));
  for (auto _ : state) {
    gelu_backward(din.data(), dout.data(), in.data(), n);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 12.0 * double(n));
}
BENCHMARK(BM_GeluBackward)->Arg(128 * 1024)->Arg(1 << 24);

void BM_SgdMomentum(benchmark::State& state) {
  const int64_t n = kMlpParams;
  auto p = random_buffer(n, 15), buf = random_buffer(n, 16);
  const auto g = random_buffer(n, 17);
  const SgdParams hp{.lr = 0.01f, .momentum = 0.9f, .weight_decay = 5e-4f};
  for (auto _ : state) {
    sgd_update(p.data(), g.data(), buf.data(), n, hp, false);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 4.0 * 5.0 * double(n));  // p, g, buf in; p, buf out
}
BENCHMARK(BM_SgdMomentum);

void BM_AdamW(benchmark::State& state) {
  const int64_t n = kMlpParams;
  auto p = random_buffer(n, 18), m = random_buffer(n, 19), v = random_buffer(n, 20, 0.0f, 1.0f);
  const auto g = random_buffer(n, 21);
  const AdamWParams hp{};
  int64_t step = 1;
  for (auto _ : state) {
    adamw_update(p.data(), g.data(), m.data(), v.data(), n, hp, step++);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 4.0 * 7.0 * double(n));  // p, g, m, v in; p, m, v out
}
BENCHMARK(BM_AdamW);

void BM_U8ToF32Normalized(benchmark::State& state) {
  const int64_t n = state.range(0);  // a batch of 128 28x28 images (in cache), or one 4 MiB sample (not)
  std::vector<uint8_t> in(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) in[size_t(i)] = uint8_t(i * 31);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    u8_to_f32_normalized(out.data(), in.data(), n, 0.286f, 0.353f);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 5.0 * double(n));
}
BENCHMARK(BM_U8ToF32Normalized)->Arg(128 * 784)->Arg(4 << 20);

// The machine's copy rate beside it: memcpy of as many bytes as the
// normalization writes (4 per element), out of cache at 4 MiB elements.
void BM_MemcpyOfTheFloats(benchmark::State& state) {
  const size_t bytes = size_t(state.range(0)) * sizeof(float);
  std::vector<uint8_t> in(bytes, 7), out(bytes);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), bytes);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2.0 * double(bytes));  // read and written
}
BENCHMARK(BM_MemcpyOfTheFloats)->Arg(128 * 784)->Arg(4 << 20);

}  // namespace
}  // namespace shardtrain::cpu

BENCHMARK_MAIN();
