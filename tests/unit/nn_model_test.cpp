#include "kernels/ops.h"
#include "runtime/core/rng.h"
#include "runtime/nn/models.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/block.h"
#include "runtime/nn/conv2d.h"
#include "runtime/nn/maxpool2d.h"
#include "runtime/nn/same_weights.h"
#include "tests/unit/kernels_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace shardtrain;
using namespace shardtrain::nn;

namespace {

Tensor random_input(int64_t batch, const Shape& sample, uint64_t seed) {
  Tensor x = Tensor::empty(batched(batch, sample));
  Rng r(seed);
  for (float& v : x.f32_span()) v = r.uniform(-1, 1);
  return x;
}

std::vector<int32_t> random_labels(int64_t batch, int64_t classes, uint64_t seed) {
  Rng r(seed);
  std::vector<int32_t> y(static_cast<size_t>(batch));
  for (auto& v : y) v = int32_t(r.below(uint64_t(classes)));
  return y;
}

// Mean softmax cross-entropy of the model on (x, y); with grads when asked.
double loss_of(Model& m, const Tensor& x, const std::vector<int32_t>& y, bool backward) {
  Tensor logits = m.forward(x);
  Tensor dlogits = Tensor::empty(logits.shape());
  const double sum = ops::softmax_xent_fused(dlogits, logits, y.data(), 1.0f / float(x.dim(0)));
  if (backward) m.backward(dlogits);
  return sum / double(x.dim(0));
}

// Every parameter's analytic gradient against central differences of the loss.
void check_model_gradients(const ModelSpec& spec, const Shape& sample, int64_t classes) {
  auto model = build_model(spec, sample, classes);
  model->initialize(3);
  const int64_t batch = 4;
  Tensor x = random_input(batch, sample, 11);
  auto y = random_labels(batch, classes, 12);
  loss_of(*model, x, y, true);
  const FlatParameters& flat = model->flat();
  std::vector<float> analytic(flat.grads().f32(), flat.grads().f32() + flat.numel());
  float* p = flat.params().f32();
  const float eps = 1e-3f;
  int checked = 0;
  for (const ParamEntry& e : flat.entries()) {
    for (int64_t i = 0; i < e.spec.shape.numel(); ++i) {
      const int64_t k = e.offset + i;
      const float saved = p[k];
      p[k] = saved + eps;
      const double up = loss_of(*model, x, y, false);
      p[k] = saved - eps;
      const double down = loss_of(*model, x, y, false);
      p[k] = saved;
      const double numeric = (up - down) / (2.0 * double(eps));
      ASSERT_NEAR(analytic[size_t(k)], numeric, 2e-3 + 3e-2 * std::fabs(numeric)) << e.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, flat.parameter_count());
}

struct RecordingHooks : BlockHooks {
  std::vector<std::string> events;
  void before_forward(int b) override { events.push_back("f" + std::to_string(b)); }
  void after_forward(int b) override { events.push_back("F" + std::to_string(b)); }
  void before_backward(int b) override { events.push_back("b" + std::to_string(b)); }
  void after_backward(int b) override { events.push_back("B" + std::to_string(b)); }
};

}  // namespace

TEST(Models, MlpHasOneBlockPerLayerAndTheRightParameterCount) {
  ModelSpec spec;  // 784-1024-1024-10
  auto m = build_model(spec, Shape{1, 28, 28}, 10);
  EXPECT_EQ(m->num_blocks(), 3);
  EXPECT_EQ(m->block(0).name(), "fc0");
  EXPECT_EQ(m->block(2).name(), "head");
  EXPECT_EQ(m->output_sample(), (Shape{10}));
  EXPECT_EQ(m->flat().parameter_count(), 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10);
}

TEST(Models, CnnShapes) {
  ModelSpec spec;
  spec.kind = nn::ModelKind::cnn;
  spec.fc_hidden = {128};
  auto m = build_model(spec, Shape{1, 28, 28}, 10);
  EXPECT_EQ(m->num_blocks(), 3);
  EXPECT_EQ(m->flat().parameter_count(),
            (32 * 25 + 32) + (64 * 32 * 25 + 64) + (64 * 7 * 7 * 128 + 128) + (128 * 10 + 10));
  Tensor logits = m->forward(random_input(2, Shape{1, 28, 28}, 1));
  EXPECT_EQ(logits.shape(), (Shape{2, 10}));
}

TEST(Models, BadSpecsAreErrors) {
  ModelSpec cnn;
  cnn.kind = nn::ModelKind::cnn;
  EXPECT_THROW(build_model(cnn, Shape{784}, 10), Error);              // flat samples
  EXPECT_FALSE(parse_enum<ModelKind>("transformer-xl").has_value());  // the config refuses the name
  ModelSpec zero;
  zero.hidden = {0};
  EXPECT_THROW(build_model(zero, Shape{784}, 10), Error);
  EXPECT_THROW(build_model(ModelSpec{}, Shape{784}, 1), Error);
}

TEST(FlatParameters, BlocksAreContiguousAlignedRanges) {
  ModelSpec spec;
  spec.hidden = {7, 5};
  auto m = build_model(spec, Shape{3}, 2);
  const FlatParameters& flat = m->flat();
  int64_t expected_offset = 0;
  for (int b = 0; b < m->num_blocks(); ++b) {
    const BlockRange& r = flat.blocks()[size_t(b)];
    EXPECT_EQ(r.offset, expected_offset);
    EXPECT_EQ(r.offset % FlatParameters::kAlignElems, 0);
    expected_offset = r.offset + r.numel;
  }
  EXPECT_EQ(expected_offset, flat.numel());
  for (const ParamEntry& e : flat.entries()) {
    const BlockRange& r = flat.blocks()[size_t(e.block)];
    EXPECT_GE(e.offset, r.offset);
    EXPECT_LE(e.offset + e.spec.shape.numel(), r.offset + r.numel) << e.name;
  }
  EXPECT_EQ(flat.entries()[0].name, "fc0.0.linear.weight");
  EXPECT_FALSE(flat.entries()[1].spec.decay);  // a bias
}

TEST(FlatParameters, InitializationIsDeterministicAndBounded) {
  ModelSpec spec;
  spec.hidden = {64};
  auto a = build_model(spec, Shape{100}, 10), b = build_model(spec, Shape{100}, 10),
       c = build_model(spec, Shape{100}, 10);
  a->initialize(5);
  b->initialize(5);
  c->initialize(6);
  const size_t bytes = a->flat().params().nbytes();
  EXPECT_EQ(std::memcmp(a->flat().params().raw(), b->flat().params().raw(), bytes), 0);
  EXPECT_NE(std::memcmp(a->flat().params().raw(), c->flat().params().raw(), bytes), 0);
  const ParamEntry& w = a->flat().entries()[0];
  const float bound = 1.0f / std::sqrt(100.0f);
  float max_abs = 0;
  for (int64_t i = 0; i < w.spec.shape.numel(); ++i)
    max_abs = std::max(max_abs, std::fabs(a->flat().params().f32()[w.offset + i]));
  EXPECT_LE(max_abs, bound);
  EXPECT_GT(max_abs, 0.9f * bound);
}

TEST(Model, HooksRunForwardInOrderAndBackwardInReverse) {
  ModelSpec spec;
  spec.hidden = {4, 4};
  auto m = build_model(spec, Shape{3}, 2);
  m->initialize(1);
  RecordingHooks hooks;
  Tensor logits = m->forward(random_input(2, Shape{3}, 1), &hooks);
  Tensor d = Tensor::zeros(logits.shape());
  m->backward(d, false, &hooks);
  EXPECT_EQ(hooks.events,
            (std::vector<std::string>{"f0", "F0", "f1", "F1", "f2", "F2", "b2", "B2", "b1", "B1", "b0", "B0"}));
}

TEST(Model, MlpGradientsMatchFiniteDifferences) {
  ModelSpec spec;
  spec.hidden = {6, 5};
  check_model_gradients(spec, Shape{1, 3, 3}, 4);
}

TEST(Model, CnnGradientsMatchFiniteDifferences) {
  ModelSpec spec;
  spec.kind = nn::ModelKind::cnn;
  spec.channels = {3, 4};
  spec.kernel_size = 3;
  spec.fc_hidden = {5};
  check_model_gradients(spec, Shape{2, 8, 8}, 3);
}

// Channels in blocks of 16 on oneDNN: the convolution makes the pool and
// the ReLU after it in one op, and the block's backward skips the ReLU. Its
// outputs and gradients are the bits of the three layers run one by one.
TEST(SequentialBlock, ReluMadeWithThePoolGivesTheLayersOwnBits) {
  const shardtrain::testing::ScopedCpuBackend onednn(cpu::CpuBackend::onednn);
  const int64_t batch = 5, C = 3, OC = 16, H = 12, K = 3;
  ASSERT_TRUE(ops::conv2d_maxpool_fuses(Device::cpu(), {batch, C, H, H, OC, K, 1, 1}, {batch, OC, H, H, 2, 2}));
  const auto layers = [&] {
    std::vector<std::unique_ptr<Layer>> l;
    l.push_back(std::make_unique<Conv2d>(C, OC, K, 1, 1));
    l.push_back(std::make_unique<MaxPool2d>(2, 2));
    l.push_back(std::make_unique<ReLU>());
    return l;
  };
  SequentialBlock block("b", layers(), Shape{C, H, H});
  auto one_by_one = layers();
  const Tensor weight = random_input(OC, Shape{C, K, K}, 61), bias = random_input(1, Shape{OC}, 62).reshape({OC});
  for (float& v : bias.f32_span()) v -= 0.5f;  // windows whose max is below 0 too
  const Tensor grads[2][2] = {{Tensor::zeros({OC, C, K, K}), Tensor::zeros({OC})},
                              {Tensor::zeros({OC, C, K, K}), Tensor::zeros({OC})}};
  const Tensor params[2] = {weight, bias};
  block.bind(params, grads[0]);
  one_by_one[0]->bind(params, grads[1]);
  const Tensor x = random_input(batch, Shape{C, H, H}, 63), g = random_input(batch, Shape{OC, H / 2, H / 2}, 64);

  const Tensor y = block.forward(x), dx = Tensor::empty(x.shape());
  block.backward(g, dx, false);

  const Tensor conv = Tensor::empty({batch, OC, H, H}), pooled = Tensor::empty(g.shape()),
               relu = Tensor::empty(g.shape());
  one_by_one[0]->forward(x, conv);
  one_by_one[1]->forward(conv, pooled);
  one_by_one[2]->forward(pooled, relu);
  const Tensor d_pooled = Tensor::empty(g.shape()), d_conv = Tensor::empty(conv.shape()),
               want_dx = Tensor::empty(x.shape());
  one_by_one[2]->backward(g, d_pooled, false);
  one_by_one[1]->backward(d_pooled, d_conv, false);
  one_by_one[0]->backward(d_conv, want_dx, false);

  int64_t zeroed = 0;
  for (float v : relu.f32_span()) zeroed += v == 0.0f ? 1 : 0;
  EXPECT_GT(zeroed, relu.numel() / 10);
  EXPECT_LT(zeroed, relu.numel() * 9 / 10);
  EXPECT_EQ(std::memcmp(y.raw(), relu.raw(), relu.nbytes()), 0);
  EXPECT_EQ(std::memcmp(dx.raw(), want_dx.raw(), dx.nbytes()), 0);
  for (int k = 0; k < 2; ++k)
    EXPECT_EQ(std::memcmp(grads[0][k].raw(), grads[1][k].raw(), grads[0][k].nbytes()), 0) << k;
}

TEST(Model, AccumulateAddsGradients) {
  ModelSpec spec;
  spec.kind = nn::ModelKind::cnn;
  spec.channels = {2};
  spec.kernel_size = 3;
  auto m = build_model(spec, Shape{1, 6, 6}, 3);
  m->initialize(2);
  Tensor x = random_input(3, Shape{1, 6, 6}, 4);
  auto y = random_labels(3, 3, 5);
  loss_of(*m, x, y, true);
  std::vector<float> once(m->flat().grads().f32(), m->flat().grads().f32() + m->flat().numel());
  Tensor logits = m->forward(x);
  Tensor dlogits = Tensor::empty(logits.shape());
  ops::softmax_xent_fused(dlogits, logits, y.data(), 1.0f / 3);
  m->backward(dlogits, /*accumulate=*/true);
  for (int64_t i = 0; i < m->flat().numel(); ++i) ASSERT_FLOAT_EQ(m->flat().grads().f32()[i], 2 * once[size_t(i)]) << i;
}

// The trainer's scope for the micro-batches after a step's first: it nests
// and restores, and where no bf16 copies are kept (the CPU) a forward under
// it is the same forward.
TEST(SameWeights, NestsRestoresAndChangesNothingOnTheCpu) {
  EXPECT_FALSE(nn::SameWeights::active());
  {
    const nn::SameWeights outer;
    EXPECT_TRUE(nn::SameWeights::active());
    {
      const nn::SameWeights inner(false);
      EXPECT_FALSE(nn::SameWeights::active());
    }
    EXPECT_TRUE(nn::SameWeights::active());
  }
  EXPECT_FALSE(nn::SameWeights::active());

  ModelSpec spec;
  spec.hidden = {8};
  auto m = build_model(spec, Shape{5}, 3);
  m->initialize(3);
  const Tensor x = random_input(4, Shape{5}, 6);
  const Tensor out = m->forward(x);
  const std::vector<float> first(out.f32(), out.f32() + out.numel());
  const nn::SameWeights same;
  const Tensor again = m->forward(x);
  ASSERT_EQ(again.numel(), out.numel());
  EXPECT_EQ(std::memcmp(first.data(), again.f32(), first.size() * sizeof(float)), 0);
}

TEST(Model, LargerEvalBatchAfterTrainingBatchWorks) {
  ModelSpec spec;
  spec.hidden = {8};
  auto m = build_model(spec, Shape{5}, 3);
  m->initialize(1);
  Tensor small = random_input(2, Shape{5}, 1), big = random_input(9, Shape{5}, 2);
  Tensor a = m->forward(small);
  std::vector<float> first(a.f32(), a.f32() + a.numel());
  Tensor b = m->forward(big);
  EXPECT_EQ(b.shape(), (Shape{9, 3}));
  Tensor again = m->forward(small);
  for (int64_t i = 0; i < again.numel(); ++i) EXPECT_EQ(again.f32()[i], first[size_t(i)]);
}
