#include "kernels/ops.h"
#include "runtime/core/rng.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/layernorm.h"
#include "runtime/nn/linear.h"
#include "runtime/nn/models.h"
#include "tests/unit/nn_test_util.h"
#include "runtime/nn/transformer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

using namespace shardtrain;
using namespace shardtrain::nn;

namespace {

using nn_test::fill_uniform;
using nn_test::random_tokens;

// A TransformerBlock with its own flat buffers, bound as the Model would.
struct StandaloneBlock {
  TransformerBlock block;
  FlatParameters flat;
  StandaloneBlock(int64_t T, int64_t C, int64_t heads)
      : block("h0", T, C, heads, 2), flat({"h0"}, {block.param_specs()}) {
    block.bind(flat.param_views(0), flat.grad_views(0));
    // Random parameters of order 1, not the 0.02 init: every path (attention
    // included) then contributes a gradient large enough to check.
    fill_uniform(flat.params(), 7, -0.5f, 0.5f);
  }
};

double dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += double(a.f32()[i]) * double(b.f32()[i]);
  return s;
}

// Central differences of loss() with respect to every element of `values`,
// against `analytic`. Same tolerance style as nn_model_test.
void expect_gradient(float* values, const float* analytic, int64_t n, const std::function<double()>& loss,
                     const std::string& what) {
  const float eps = 1e-2f;
  int failures = 0;
  for (int64_t k = 0; k < n; ++k) {
    const float saved = values[k];
    values[k] = saved + eps;
    const double up = loss();
    values[k] = saved - eps;
    const double down = loss();
    values[k] = saved;
    const double numeric = (up - down) / (2.0 * double(eps));
    if (std::fabs(analytic[k] - numeric) > 3e-3 + 2e-2 * std::fabs(numeric) && ++failures <= 5)
      ADD_FAILURE() << what << "[" << k << "]: analytic " << analytic[k] << ", numeric " << numeric;
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << n << " differ";
}

ModelSpec tiny_gpt(int64_t layers, int64_t heads, int64_t C) {
  ModelSpec spec;
  spec.kind = nn::ModelKind::gpt;
  spec.n_layer = layers;
  spec.n_head = heads;
  spec.n_embd = C;
  return spec;
}

// Mean next-token cross-entropy; logits [B, T, V] are B*T rows.
double gpt_loss(Model& m, const Tensor& x, const std::vector<int32_t>& y, bool backward) {
  Tensor logits = m.forward(x);
  Tensor dlogits = Tensor::empty(logits.shape());
  const int64_t rows = x.numel();
  const double sum = ops::softmax_xent_fused(dlogits, logits, y.data(), 1.0f / float(rows));
  if (backward) m.backward(dlogits);
  return sum / double(rows);
}

// Labels: the next token of each sequence (the last position predicts token 0).
std::vector<int32_t> next_tokens(const Tensor& x) {
  const int64_t B = x.dim(0), T = x.dim(1);
  std::vector<int32_t> y(size_t(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) y[size_t(b * T + t)] = t + 1 < T ? x.i32()[b * T + t + 1] : 0;
  return y;
}

}  // namespace

TEST(TransformerBlock, ParametersAreOneBlockWithGptInit) {
  StandaloneBlock s(4, 8, 2);
  const auto specs = s.block.param_specs();
  ASSERT_EQ(specs.size(), 12u);
  EXPECT_EQ(specs[0].name, "ln1.layernorm.weight");
  EXPECT_EQ(specs[2].name, "qkv.linear.weight");
  EXPECT_EQ(specs[2].shape, (Shape{24, 8}));
  EXPECT_EQ(specs[11].name, "fc_proj.linear.bias");
  EXPECT_EQ(specs[2].init, Init::normal);
  EXPECT_FLOAT_EQ(specs[4].std, 0.02f / 2.0f);  // proj: 0.02 / sqrt(2 * n_layer)
  EXPECT_EQ(specs[3].init, Init::zeros);
  EXPECT_FALSE(specs[0].decay);
  EXPECT_EQ(s.flat.blocks().size(), 1u);
  EXPECT_EQ(s.flat.parameter_count(), 2 * 8 + 24 * 8 + 24 + 8 * 8 + 8 + 2 * 8 + 32 * 8 + 32 + 8 * 32 + 8);
  EXPECT_EQ(s.block.output_shape(Shape{4, 8}), (Shape{4, 8}));
  EXPECT_THROW(s.block.output_shape(Shape{5, 8}), Error);
  EXPECT_THROW(TransformerBlock("bad", 4, 10, 3), Error);
}

TEST(TransformerBlock, GradientsMatchFiniteDifferences) {
  const int64_t B = 2, T = 4, C = 8, heads = 2;
  StandaloneBlock s(T, C, heads);
  Tensor x = Tensor::empty({B, T, C});
  fill_uniform(x, 8, -1.0f, 1.0f);
  Tensor R = Tensor::empty({B, T, C});
  fill_uniform(R, 9, -1.0f, 1.0f);
  auto loss = [&] { return dot(s.block.forward(x), R); };
  loss();
  Tensor dx = Tensor::empty({B, T, C});
  s.block.backward(R, dx, false);
  std::vector<float> dx_analytic(dx.f32(), dx.f32() + dx.numel());
  std::vector<float> dp(s.flat.grads().f32(), s.flat.grads().f32() + s.flat.numel());
  expect_gradient(x.f32(), dx_analytic.data(), x.numel(), loss, "dx");
  for (const ParamEntry& e : s.flat.entries())
    expect_gradient(s.flat.params().f32() + e.offset, dp.data() + e.offset, e.spec.shape.numel(), loss, e.name);
}

TEST(TransformerBlock, AccumulateAddsParameterGradientsAndOverwritesInputGradient) {
  const int64_t B = 3, T = 5, C = 8;
  StandaloneBlock s(T, C, 4);
  Tensor x = Tensor::empty({B, T, C}), R = Tensor::empty({B, T, C});
  fill_uniform(x, 10, -1.0f, 1.0f);
  fill_uniform(R, 11, -1.0f, 1.0f);
  s.block.forward(x);
  Tensor dx = Tensor::empty({B, T, C});
  s.block.backward(R, dx, false);
  const std::vector<float> once(s.flat.grads().f32(), s.flat.grads().f32() + s.flat.numel());
  const std::vector<float> dx_once(dx.f32(), dx.f32() + dx.numel());
  s.block.forward(x);
  s.block.backward(R, dx, true);
  for (int64_t i = 0; i < s.flat.numel(); ++i)
    ASSERT_NEAR(s.flat.grads().f32()[i], 2 * once[size_t(i)], 1e-6 + 1e-5 * std::fabs(once[size_t(i)])) << i;
  for (int64_t i = 0; i < dx.numel(); ++i) ASSERT_EQ(dx.f32()[i], dx_once[size_t(i)]) << i;
  // Without an input gradient the parameter gradients are the same.
  s.block.forward(x);
  s.block.backward(R, Tensor(), false);
  for (int64_t i = 0; i < s.flat.numel(); ++i) ASSERT_EQ(s.flat.grads().f32()[i], once[size_t(i)]) << i;
}

// Mixed precision: the same block with bf16 activations (kernels/ops.h)
// stays within bf16's rounding of the f32 block, output and gradients; and
// without an input gradient (the block first in a model) its parameter
// gradients are those it gives with one.
TEST(TransformerBlock, Bf16ActivationsStayCloseToF32) {
  const int64_t B = 2, T = 6, C = 16;
  StandaloneBlock s(T, C, 4);
  Tensor x = Tensor::empty({B, T, C}), R = Tensor::empty({B, T, C});
  fill_uniform(x, 20, -1.0f, 1.0f);
  fill_uniform(R, 21, -1.0f, 1.0f);
  auto run = [&](DType act, bool with_din) {
    s.block.set_activation_dtype(act);
    const Tensor out = s.block.forward(x);
    std::vector<float> values(out.f32(), out.f32() + out.numel());
    Tensor dx = with_din ? Tensor::empty({B, T, C}) : Tensor();
    s.block.backward(R, dx, false);
    if (with_din) values.insert(values.end(), dx.f32(), dx.f32() + dx.numel());
    values.insert(values.end(), s.flat.grads().f32(), s.flat.grads().f32() + s.flat.numel());
    return values;
  };
  const std::vector<float> ref = run(DType::f32, true), mixed = run(DType::bf16, true);
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err += double(mixed[i] - ref[i]) * double(mixed[i] - ref[i]);
    norm += double(ref[i]) * double(ref[i]);
  }
  // bf16 keeps 8 significant bits (relative rounding 2^-9 = 2e-3); a few
  // roundings in a row stay well under 2e-2.
  EXPECT_LT(std::sqrt(err / norm), 2e-2);
  EXPECT_GT(std::sqrt(err / norm), 0.0) << "bf16 activations changed nothing: were they f32?";
  const std::vector<float> no_din = run(DType::bf16, false);
  const size_t params = size_t(s.flat.numel());
  EXPECT_TRUE(std::equal(no_din.end() - long(params), no_din.end(), mixed.end() - long(params)));
}

// The block's forward and backward against the same layers run unfused (a
// separate add beside each residual LayerNorm, as before the fused kernels),
// on the same parameters: output, input gradient and every parameter
// gradient have exactly the same bits, so fusing moved no training result.
TEST(TransformerBlock, FusedResidualLayerNormsGiveTheUnfusedBits) {
  const int64_t B = 3, T = 6, C = 16, H = 2;
  StandaloneBlock s(T, C, H);
  FlatParameters ref_flat({"h0"}, {s.block.param_specs()});
  std::copy_n(s.flat.params().f32(), s.flat.numel(), ref_flat.params().f32());
  LayerNorm ln1(C), ln2(C);
  Linear qkv(C, 3 * C), proj(C, C), fc(C, 4 * C), fc_proj(4 * C, C);
  GELU gelu;
  Layer* layers[] = {&ln1, &qkv, &proj, &ln2, &fc, &fc_proj};
  const auto params = ref_flat.param_views(0), grads = ref_flat.grad_views(0);
  for (size_t i = 0; i < 6; ++i)
    layers[i]->bind(std::span(params).subspan(2 * i, 2), std::span(grads).subspan(2 * i, 2));
  Tensor x = Tensor::empty({B, T, C}), R = Tensor::empty({B, T, C});
  fill_uniform(x, 12, -1.0f, 1.0f);
  fill_uniform(R, 13, -1.0f, 1.0f);
  auto act = [&](int64_t width) { return Tensor::empty({B, T, width}); };
  const auto kernel = ops::attention_kernel(Device::cpu(), B, T, C, H);
  const Tensor ln1o = act(C), qkvo = act(3 * C), attn = act(C), res1 = act(C);
  const Tensor att = Tensor::empty({ops::attention_saved_floats(kernel, B, T, C, H)});
  const Tensor ln2o = act(C), fco = act(4 * C), gel = act(4 * C), out = act(C), ga = act(C), gb = act(C);
  const Tensor scratch = Tensor::empty({ops::attention_scratch_floats(kernel, Device::cpu(), B, T, C, H)});
  const Tensor g3 = act(3 * C), g4 = act(4 * C), want_dx = act(C), dx = act(C);
  for (const bool accumulate : {false, true}) {
    ln1.forward(x, ln1o);
    qkv.forward(ln1o, qkvo);
    ops::attention_forward(attn, att, qkvo, H, kernel);
    proj.forward(attn, res1);
    ops::add(res1, res1, x);
    ln2.forward(res1, ln2o);
    fc.forward(ln2o, fco);
    gelu.forward(fco, gel);
    fc_proj.forward(gel, out);
    ops::add(out, out, res1);
    fc_proj.backward(R, g4, accumulate);
    gelu.backward(g4, g4, accumulate);
    fc.backward(g4, ga, accumulate);
    ln2.backward(ga, gb, accumulate);
    ops::add(gb, gb, R);
    proj.backward(gb, ga, accumulate);
    ops::attention_backward(g3, scratch, ga, qkvo, attn, att, H, kernel);
    qkv.backward(g3, ga, accumulate);
    ln1.backward(ga, want_dx, accumulate);
    ops::add(want_dx, want_dx, gb);

    const Tensor got = s.block.forward(x);
    s.block.backward(R, dx, accumulate);
    ASSERT_EQ(std::memcmp(got.raw(), out.raw(), out.nbytes()), 0) << "output, accumulate " << accumulate;
    ASSERT_EQ(std::memcmp(dx.raw(), want_dx.raw(), dx.nbytes()), 0) << "din, accumulate " << accumulate;
    ASSERT_EQ(std::memcmp(s.flat.grads().raw(), ref_flat.grads().raw(), ref_flat.grads().nbytes()), 0)
        << "parameter gradients, accumulate " << accumulate;
  }
}

TEST(Gpt, ShapesBlocksAndParameterCount) {
  const int64_t T = 8, V = 11, C = 16, L = 2;
  auto m = build_model(tiny_gpt(L, 2, C), Shape{T}, V);
  ASSERT_EQ(m->num_blocks(), 4);
  EXPECT_EQ(m->block(0).name(), "embed");
  EXPECT_EQ(m->block(1).name(), "h0");
  EXPECT_EQ(m->block(3).name(), "head");
  EXPECT_EQ(m->output_sample(), (Shape{T, V}));
  const int64_t per_block = 12 * C * C + 13 * C;
  EXPECT_EQ(m->flat().parameter_count(), V * C + T * C + L * per_block + 2 * C + C * V);
  m->initialize(1);
  Tensor logits = m->forward(random_tokens(3, T, V, 2));
  EXPECT_EQ(logits.shape(), (Shape{3, T, V}));
  for (float v : logits.f32_span()) ASSERT_TRUE(std::isfinite(v));
}

TEST(Gpt, BadSpecsAndInputsAreErrors) {
  EXPECT_THROW(build_model(tiny_gpt(1, 3, 16), Shape{8}, 11), Error);        // 16 % 3
  EXPECT_THROW(build_model(tiny_gpt(1, 2, 16), Shape{1, 8, 8}, 11), Error);  // not token ids
  ModelSpec short_ctx = tiny_gpt(1, 2, 16);
  short_ctx.block_size = 4;
  EXPECT_THROW(build_model(short_ctx, Shape{8}, 11), Error);
  ModelSpec vocab = tiny_gpt(1, 2, 16);
  vocab.vocab_size = 12;
  EXPECT_THROW(build_model(vocab, Shape{8}, 11), Error);
  auto m = build_model(tiny_gpt(1, 2, 16), Shape{8}, 11);
  m->initialize(1);
  EXPECT_THROW(m->forward(Tensor::zeros({2, 8})), Error);  // f32, not i32 ids
  Tensor bad = random_tokens(2, 8, 11, 3);
  bad.i32()[5] = 11;
  EXPECT_THROW(m->forward(bad), Error);
}

TEST(Gpt, LogitsAtTDoNotDependOnLaterTokens) {
  const int64_t T = 6, V = 9;
  auto m = build_model(tiny_gpt(2, 2, 8), Shape{T}, V);
  m->initialize(4);
  Tensor x = random_tokens(1, T, V, 5);
  Tensor a = m->forward(x);
  const std::vector<float> before(a.f32(), a.f32() + a.numel());
  x.i32()[3] = (x.i32()[3] + 1) % int32_t(V);
  Tensor b = m->forward(x);
  for (int64_t t = 0; t < T; ++t) {
    bool same = true;
    for (int64_t v = 0; v < V; ++v) same = same && b.f32()[t * V + v] == before[size_t(t * V + v)];
    EXPECT_EQ(same, t < 3) << "position " << t;
  }
}

TEST(Gpt, GradientsMatchFiniteDifferences) {
  const int64_t B = 2, T = 4, V = 7;
  auto m = build_model(tiny_gpt(1, 2, 8), Shape{T}, V);
  fill_uniform(m->flat().params(), 12, -0.5f, 0.5f);
  Tensor x = random_tokens(B, T, V, 13);
  const auto y = next_tokens(x);
  gpt_loss(*m, x, y, true);
  const FlatParameters& flat = m->flat();
  std::vector<float> analytic(flat.grads().f32(), flat.grads().f32() + flat.numel());
  auto loss = [&] { return gpt_loss(*m, x, y, false); };
  for (const ParamEntry& e : flat.entries())
    expect_gradient(flat.params().f32() + e.offset, analytic.data() + e.offset, e.spec.shape.numel(), loss, e.name);
}

TEST(Gpt, LossDecreasesOverSgdStepsOnAFixedBatch) {
  const int64_t B = 4, T = 16, V = 32;
  auto m = build_model(tiny_gpt(2, 4, 32), Shape{T}, V);
  m->initialize(6);
  Tensor x = random_tokens(B, T, V, 14);
  const auto y = next_tokens(x);
  kernels::SgdParams hp;
  hp.lr = 0.5f;
  const double first = gpt_loss(*m, x, y, true);
  double last = first;
  Tensor scalars = Tensor::empty({kernels::SgdStep::kFloats});
  for (int step = 0; step < 20; ++step) {
    ops::store_floats(scalars, kernels::SgdStep::of(hp, step == 0).floats());
    ops::sgd_update(m->flat().params(), m->flat().grads(), Tensor(), hp, scalars);
    last = gpt_loss(*m, x, y, true);
  }
  // Near-uniform predictions at init (the head is fan-in uniform, so not exactly).
  EXPECT_NEAR(first, std::log(double(V)), 0.5);
  EXPECT_LT(last, 0.75 * first) << "first " << first << ", after 20 steps " << last;
}

TEST(Gpt, ForwardBackwardTiming) {
  // B=8, T=64, C=128, 4 heads, 2 layers, vocab 256: printed, not asserted.
  const int64_t B = 8, T = 64, V = 256;
  auto m = build_model(tiny_gpt(2, 4, 128), Shape{T}, V);
  m->initialize(1);
  Tensor x = random_tokens(B, T, V, 15);
  const auto y = next_tokens(x);
  gpt_loss(*m, x, y, true);  // warm-up: buffers allocated
  const int reps = 5;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) gpt_loss(*m, x, y, true);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  const double ms = std::chrono::duration<double, std::milli>(elapsed).count() / reps;
  std::printf("gpt forward+backward B=%lld T=%lld C=128 heads=4 layers=2 V=%lld: %.2f ms\n", (long long)B, (long long)T,
              (long long)V, ms);
}
