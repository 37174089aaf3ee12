// sgemm throughput (GFLOP/s, one BLAS thread) at a large square shape, at
// exactly the GEMMs an MLP 784-1024-1024-10 training step issues through
// linear_forward / linear_backward, and for a conv2d forward. Compare the
// MLP shapes with 1024^3: small-batch GEMMs run well below peak, and the
// "step" rows are the ceiling a whole training step can reach.
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/linear.h"
#include "runtime/core/rng.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <string>
#include <vector>

namespace shardtrain::cpu {
namespace {

std::vector<float> random_buffer(int64_t n, uint64_t key) {
  Rng rng(key);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

void set_gflops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_iteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// One GEMM of the given shape, operands laid out densely as gemm() expects.
void bm_gemm(benchmark::State& state, GemmCall c) {
  const auto A = random_buffer(c.M * c.K, 1), B = random_buffer(c.K * c.N, 2);
  auto C = random_buffer(c.M * c.N, 3);
  const int64_t lda = c.trans_a ? c.M : c.K, ldb = c.trans_b ? c.K : c.N;
  for (auto _ : state) {
    gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), c.N);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  set_gflops(state, c.flops());
}

constexpr int64_t kMlp[] = {784, 1024, 1024, 10};

// The GEMMs of one MLP step, recorded from the real linear_forward /
// linear_backward calls (the first layer computes no input gradient).
std::vector<GemmCall> mlp_step_gemms(int64_t batch) {
  GemmRecorder recorder;
  for (int l = 0; l < 3; ++l) {
    const int64_t IC = kMlp[l], OC = kMlp[l + 1];
    std::vector<float> in(static_cast<size_t>(batch * IC)), w(static_cast<size_t>(OC * IC)), b(static_cast<size_t>(OC)),
        out(static_cast<size_t>(batch * OC)), din(static_cast<size_t>(batch * IC));
    linear_forward(out.data(), in.data(), w.data(), b.data(), batch, IC, OC);
    linear_backward(l == 0 ? nullptr : din.data(), w.data(), b.data(), out.data(), in.data(), w.data(), batch, IC, OC,
                    false);
  }
  return recorder.calls();
}

// All GEMMs of an MLP step back to back: the pure-GEMM rate of a step.
void bm_mlp_step_gemms(benchmark::State& state, int64_t batch) {
  const auto calls = mlp_step_gemms(batch);
  const int64_t biggest = 1024 * 1024;
  const auto A = random_buffer(biggest, 4), B = random_buffer(biggest, 5);
  auto C = random_buffer(biggest, 6);
  double flops = 0.0;
  for (const auto& c : calls) flops += c.flops();
  for (auto _ : state) {
    for (const auto& c : calls)
      gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, 1.0f, A.data(), c.trans_a ? c.M : c.K, B.data(), c.trans_b ? c.K : c.N,
           0.0f, C.data(), c.N);
    benchmark::ClobberMemory();
  }
  set_gflops(state, flops);
}

// The same step through linear_forward / linear_backward (bias fill, dbias
// sums included): how much the non-GEMM parts of the layers cost.
void bm_mlp_step_linear(benchmark::State& state, int64_t batch) {
  struct Layer {
    std::vector<float> w, b, dw, db, out, dout;
  };
  std::vector<Layer> layers;
  const auto x = random_buffer(batch * kMlp[0], 7);
  for (int l = 0; l < 3; ++l) {
    const int64_t IC = kMlp[l], OC = kMlp[l + 1];
    layers.push_back({random_buffer(OC * IC, 8 + l), random_buffer(OC, 11 + l),
                      std::vector<float>(static_cast<size_t>(OC * IC)), std::vector<float>(static_cast<size_t>(OC)),
                      std::vector<float>(static_cast<size_t>(batch * OC)), random_buffer(batch * OC, 14 + l)});
  }
  double flops = 0.0;
  for (const auto& c : mlp_step_gemms(batch)) flops += c.flops();
  for (auto _ : state) {
    const float* in = x.data();
    for (int l = 0; l < 3; ++l) {
      linear_forward(layers[l].out.data(), in, layers[l].w.data(), layers[l].b.data(), batch, kMlp[l], kMlp[l + 1]);
      in = layers[l].out.data();
    }
    for (int l = 2; l >= 0; --l) {
      const float* layer_in = l == 0 ? x.data() : layers[l - 1].out.data();
      float* din = l == 0 ? nullptr : layers[l - 1].dout.data();
      linear_backward(din, layers[l].dw.data(), layers[l].db.data(), layers[l].dout.data(), layer_in,
                      layers[l].w.data(), batch, kMlp[l], kMlp[l + 1], false);
    }
    benchmark::ClobberMemory();
  }
  set_gflops(state, flops);
}

// The small CNN's convolutions (examples/fmnist_cnn.toml, batch 128): 1 -> 32
// channels, 5x5, pad 2 on 28x28, then 32 -> 64 on 14x14.
const Conv2dShape kConv1{128, 1, 28, 28, 32, 5, 1, 2};
const Conv2dShape kConv2{128, 32, 14, 14, 64, 5, 1, 2};

void bm_conv2d_forward(benchmark::State& state, Conv2dShape s) {
  const auto in = random_buffer(s.B * s.C * s.H * s.W, 20);
  const auto w = random_buffer(s.OC * s.C * s.K * s.K, 21), b = random_buffer(s.OC, 22);
  std::vector<float> out(static_cast<size_t>(s.B * s.OC * s.OH() * s.OW())), col(static_cast<size_t>(s.col_floats()));
  for (auto _ : state) {
    conv2d_forward(out.data(), in.data(), w.data(), b.data(), col.data(), s);
    benchmark::ClobberMemory();
  }
  set_gflops(state, s.forward_flops());
}

// The same layer's backward: weight, bias and input gradients (the first
// layer computes none for its input, as in the model).
void bm_conv2d_backward(benchmark::State& state, Conv2dShape s) {
  const auto in = random_buffer(s.B * s.C * s.H * s.W, 20);
  const auto w = random_buffer(s.OC * s.C * s.K * s.K, 21);
  const auto dout = random_buffer(s.B * s.OC * s.OH() * s.OW(), 23);
  std::vector<float> dw(w.size()), db(static_cast<size_t>(s.OC)), din(in.size()),
      col(static_cast<size_t>(s.col_floats()));
  for (auto _ : state) {
    conv2d_backward(s.C == 1 ? nullptr : din.data(), dw.data(), db.data(), dout.data(), in.data(), w.data(), col.data(),
                    s, false);
    benchmark::ClobberMemory();
  }
  set_gflops(state, (s.C == 1 ? 1 : 2) * s.forward_flops());
}

// im2col and col2im alone, one sample of that layer (128 of each per
// backward, 128 im2col per forward).
void bm_im2col(benchmark::State& state, bool adjoint) {
  const Conv2dShape s{1, 32, 14, 14, 64, 5, 1, 2};
  auto image = random_buffer(s.C * s.H * s.W, 24);
  auto col = random_buffer(s.col_floats(), 25);
  for (auto _ : state) {
    if (adjoint)
      col2im(image.data(), col.data(), s);
    else
      im2col(col.data(), image.data(), s);
    benchmark::ClobberMemory();
  }
  state.counters["floats/ns"] =
      benchmark::Counter(double(s.col_floats()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Registers fn(state, arg) under a formatted name (RegisterBenchmark copies it).
template <class Fn, class Arg>
benchmark::internal::Benchmark* add(const std::string& name, Fn fn, Arg arg) {
  return benchmark::RegisterBenchmark(name.c_str(), fn, arg);
}

// The same under each runtime.cpu_backend that computes it differently:
// NAME/openblas and NAME/onednn, side by side in one run.
template <class Fn, class Arg>
void add_per_backend(const std::string& name, Fn fn, Arg arg) {
  for (const CpuBackend backend : {CpuBackend::openblas, CpuBackend::onednn})
    benchmark::RegisterBenchmark(fmt::format("{}/{}", name, name_of(backend)).c_str(), [=](benchmark::State& state) {
      const CpuBackend before = cpu_backend();
      set_cpu_backend(backend);
      fn(state, arg);
      set_cpu_backend(before);
    })->Unit(benchmark::kMillisecond);
}

void register_all() {
  add("sgemm/NN/1024x1024x1024", bm_gemm, GemmCall{false, false, 1024, 1024, 1024})->Unit(benchmark::kMillisecond);
  // The models' products on each library: the MLP's step (batch 128), the
  // GPT's (examples/gpt_kjv.toml: 2 x 128 wide, T 64, batch 32: 2048 rows)
  // and the CNN's convolutions.
  add_per_backend("backend/sgemm/NN/1024x1024x1024", bm_gemm, GemmCall{false, false, 1024, 1024, 1024});
  add_per_backend("backend/mlp_b128/step_gemms_only", bm_mlp_step_gemms, int64_t{128});
  add_per_backend("backend/gpt/qkv_fwd_NT/2048x384x128", bm_gemm, GemmCall{false, true, 2048, 384, 128});
  add_per_backend("backend/gpt/mlp_dX_NN/2048x128x512", bm_gemm, GemmCall{false, false, 2048, 128, 512});
  add_per_backend("backend/gpt/mlp_dW_TN/512x128x2048", bm_gemm, GemmCall{true, false, 512, 128, 2048});
  add_per_backend("backend/conv2d_fwd/B128_1to32_5x5_pad2_28x28", bm_conv2d_forward, kConv1);
  add_per_backend("backend/conv2d_bwd/B128_1to32_5x5_pad2_28x28", bm_conv2d_backward, kConv1);
  add_per_backend("backend/conv2d_fwd/B128_32to64_5x5_pad2_14x14", bm_conv2d_forward, kConv2);
  add_per_backend("backend/conv2d_bwd/B128_32to64_5x5_pad2_14x14", bm_conv2d_backward, kConv2);
  for (int64_t batch : {64, 128}) {
    // Each layer's GEMMs exactly as linear_forward / linear_backward issue them.
    for (int l = 0; l < 3; ++l) {
      const int64_t IC = kMlp[l], OC = kMlp[l + 1];
      add(fmt::format("mlp_b{}/fwd_NT/{}x{}x{}", batch, batch, OC, IC), bm_gemm, GemmCall{false, true, batch, OC, IC});
      add(fmt::format("mlp_b{}/dW_TN/{}x{}x{}", batch, OC, IC, batch), bm_gemm, GemmCall{true, false, OC, IC, batch});
      if (l > 0)
        add(fmt::format("mlp_b{}/dX_NN/{}x{}x{}", batch, batch, IC, OC), bm_gemm,
            GemmCall{false, false, batch, IC, OC});
    }
    add(fmt::format("mlp_b{}/step_gemms_only", batch), bm_mlp_step_gemms, batch)->Unit(benchmark::kMillisecond);
    add(fmt::format("mlp_b{}/step_linear_layers", batch), bm_mlp_step_linear, batch)->Unit(benchmark::kMillisecond);
  }
  add("conv2d_fwd/B128_1to32_5x5_pad2_28x28", bm_conv2d_forward, kConv1)->Unit(benchmark::kMillisecond);
  add("conv2d_bwd/B128_1to32_5x5_pad2_28x28", bm_conv2d_backward, kConv1)->Unit(benchmark::kMillisecond);
  add("conv2d_fwd/B128_32to64_5x5_pad2_14x14", bm_conv2d_forward, kConv2)->Unit(benchmark::kMillisecond);
  add("conv2d_bwd/B128_32to64_5x5_pad2_14x14", bm_conv2d_backward, kConv2)->Unit(benchmark::kMillisecond);
  add("conv2d_im2col/32x14x14_5x5_pad2", bm_im2col, false);
  add("conv2d_col2im/32x14x14_5x5_pad2", bm_im2col, true);
  // That layer's per-sample GEMMs (conv2d.cpp): out = W col, dW += dout col^T,
  // dcol = W^T dout.
  add("cnn_conv2/fwd_NN/64x196x800", bm_gemm, GemmCall{false, false, 64, 196, 800});
  add("cnn_conv2/dW_NT/64x800x196", bm_gemm, GemmCall{false, true, 64, 800, 196});
  add("cnn_conv2/dcol_TN/800x196x64", bm_gemm, GemmCall{true, false, 800, 196, 64});
}

}  // namespace
}  // namespace shardtrain::cpu

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  shardtrain::cpu::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
