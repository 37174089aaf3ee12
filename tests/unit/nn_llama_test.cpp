// The Llama model: published parameter counts, gradients by finite
// differences, and activation checkpointing giving the bits of `none`.
#include "kernels/ops.h"
#include "runtime/core/rng.h"
#include "runtime/nn/llama_block.h"
#include "runtime/nn/models.h"
#include "tests/unit/nn_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

using namespace shardtrain;
using namespace shardtrain::nn;

namespace {

using nn_test::fill_uniform;
using nn_test::random_tokens;

ModelSpec llama_spec(int64_t layers, int64_t heads, int64_t kv_heads, int64_t C, int64_t ffn) {
  ModelSpec s;
  s.kind = ModelKind::llama;
  s.n_layer = layers;
  s.n_head = heads;
  s.n_kv_head = kv_heads;
  s.n_embd = C;
  s.ffn_hidden = ffn;
  return s;
}

int64_t parameters(ModelSpec spec, int64_t T, int64_t vocab) {
  spec.vocab_size = vocab;
  return build_model(spec, Shape{T}, vocab, /*layout_only=*/true)->flat().parameter_count();
}

double dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += double(a.f32()[i]) * double(b.f32()[i]);
  return s;
}

}  // namespace

TEST(Llama, ParameterCountsAreThePublishedOnes) {
  // Llama-2 (Touvron et al. 2023; the Hugging Face checkpoints' counts) and Llama-3 8B.
  EXPECT_EQ(parameters(llama_spec(32, 32, 32, 4096, 11008), 16, 32000), 6738415616);
  EXPECT_EQ(parameters(llama_spec(40, 40, 40, 5120, 13824), 16, 32000), 13015864320);
  EXPECT_EQ(parameters(llama_spec(80, 64, 8, 8192, 28672), 16, 32000), 68976648192);
  EXPECT_EQ(parameters(llama_spec(32, 32, 8, 4096, 14336), 16, 128256), 8030261248);
  // The default SwiGLU width is Llama's rule.
  EXPECT_EQ(llama_ffn_hidden(4096), 11008);
  EXPECT_EQ(llama_ffn_hidden(5120), 13824);
}

TEST(Llama, BadShapesAreErrorsNamingTheKey) {
  auto message = [](const ModelSpec& s) {
    try {
      (void)build_model(s, Shape{8}, 16, true);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(llama_spec(1, 4, 3, 16, 32)).find("model.n_kv_head"), std::string::npos);
  EXPECT_NE(message(llama_spec(1, 4, 4, 12, 32)).find("even"), std::string::npos);  // head size 3
}

TEST(Llama, TiedEmbeddingsHoldOneWeight) {
  ModelSpec tied = llama_spec(2, 4, 2, 8, 12);
  tied.tie_embeddings = true;
  EXPECT_EQ(parameters(llama_spec(2, 4, 2, 8, 12), 5, 11) - parameters(tied, 5, 11), 11 * 8);
}

namespace {

// Gradients of L = sum(logits * R) through the whole model (embedding,
// Llama Blocks with grouped-query attention, head; untied and tied) by
// central differences.
void check_gradients(bool tie) {
  const int64_t B = 2, T = 5, V = 11;
  ModelSpec spec = llama_spec(2, 4, 2, 8, 12);
  spec.tie_embeddings = tie;
  auto model = build_model(spec, Shape{T}, V);
  model->initialize(3);
  fill_uniform(model->flat().params(), 5, -0.5f, 0.5f);  // order-1 weights: every path matters
  const Tensor x = random_tokens(B, T, V, 9);
  Tensor R = Tensor::empty({B, T, V});
  fill_uniform(R, 11, -1.0f, 1.0f);
  auto loss = [&] { return dot(model->forward(x), R); };
  (void)model->forward(x);
  model->backward(R);
  const Tensor params = model->flat().params(), grads = model->flat().grads();
  const std::vector<float> analytic(grads.f32(), grads.f32() + grads.numel());
  // Every parameter of the Blocks (the embedding's rows of unused tokens have
  // no gradient; the Blocks' parameters all do).
  int failures = 0, checked = 0;
  for (const BlockRange& r : model->flat().blocks()) {
    for (int64_t k = r.offset; k < r.offset + r.numel; k += (r.numel > 400 ? 3 : 1)) {
      float* p = params.f32() + k;
      const float saved = *p, eps = 1e-2f;
      *p = saved + eps;
      const double up = loss();
      *p = saved - eps;
      const double down = loss();
      *p = saved;
      const double numeric = (up - down) / (2.0 * double(eps));
      ++checked;
      if (std::fabs(analytic[size_t(k)] - numeric) > 3e-3 + 2e-2 * std::fabs(numeric) && ++failures <= 5)
        ADD_FAILURE() << "parameter " << k << ": analytic " << analytic[size_t(k)] << ", numeric " << numeric;
    }
  }
  EXPECT_EQ(failures, 0) << failures << " of " << checked << " differ" << (tie ? " (tied)" : "");
}

}  // namespace

TEST(Llama, GradientsMatchFiniteDifferences) {
  check_gradients(false);
  check_gradients(true);
}

namespace {

struct StepResult {
  std::vector<float> logits, grads;
};

// A forward and backward (twice: the second accumulates, as micro-batches
// do) with every `every`-th Block recomputing as `mode` says.
StepResult step(Recompute mode, int every, DType act) {
  const int64_t B = 3, T = 9, V = 13;
  auto model = build_model(llama_spec(3, 4, 2, 16, 24), Shape{T}, V);
  model->initialize(1);
  model->set_activation_dtype(act);
  model->set_activation_checkpointing(mode, every);
  Tensor R = Tensor::empty({B, T, V});
  fill_uniform(R, 2, -1.0f, 1.0f);
  StepResult out;
  for (int micro = 0; micro < 2; ++micro) {
    const Tensor logits = model->forward(random_tokens(B, T, V, 4 + uint64_t(micro)));
    Tensor f32 = logits.reshape({logits.numel()});
    if (logits.dtype() != DType::f32) {
      f32 = Tensor::empty({logits.numel()});
      ops::convert(f32, logits.reshape({logits.numel()}));
    }
    out.logits.insert(out.logits.end(), f32.f32(), f32.f32() + f32.numel());
    model->backward(R, /*accumulate=*/micro > 0);
  }
  // An evaluation-sized forward in between must not disturb the next step.
  (void)model->forward(random_tokens(5, T, V, 7));
  (void)model->forward(random_tokens(B, T, V, 4));
  model->backward(R, true);
  const Tensor g = model->flat().grads();
  out.grads.assign(g.f32(), g.f32() + g.numel());
  return out;
}

}  // namespace

TEST(Llama, ActivationCheckpointingGivesTheBitsOfNone) {
  for (DType act : {DType::f32, DType::bf16}) {
    const StepResult none = step(Recompute::none, 1, act);
    for (Recompute mode : {Recompute::selective, Recompute::full})
      for (int every : {1, 2}) {
        const StepResult r = step(mode, every, act);
        EXPECT_EQ(r.logits, none.logits) << fmt::format("{} every {} ({})", mode, every, dtype_name(act));
        EXPECT_EQ(r.grads, none.grads) << fmt::format("{} every {} ({})", mode, every, dtype_name(act));
      }
  }
}

TEST(Llama, CheckpointingNeedsBlocksThatRecompute) {
  ModelSpec gpt;
  gpt.kind = ModelKind::gpt;
  gpt.n_layer = 1;
  gpt.n_head = 2;
  gpt.n_embd = 8;
  auto model = build_model(gpt, Shape{4}, 16);
  EXPECT_THROW(model->set_activation_checkpointing(Recompute::full, 1), Error);
  EXPECT_NO_THROW(model->set_activation_checkpointing(Recompute::none, 1));
}
