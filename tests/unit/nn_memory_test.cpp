// Model::activation_bytes, what `shardtrain plan` predicts activations from,
// equals what the allocator counts when the models actually run: forward
// (evaluation) and forward + backward (training), for every model kind.
#include "kernels/ops.h"
#include "runtime/core/allocator.h"
#include "runtime/nn/models.h"

#include <gtest/gtest.h>

using namespace shardtrain;
using namespace shardtrain::nn;

namespace {

struct Case {
  const char* name;
  ModelSpec spec;
  Shape sample;  // the model's input sample
  int64_t classes;
  bool tokens;  // the input holds token ids (i32)
  DType activations = DType::f32;
  Recompute recompute = Recompute::none;
  int every = 1;
};

std::vector<Case> cases() {
  ModelSpec mlp;
  mlp.hidden = {64, 32};
  ModelSpec cnn;
  cnn.kind = nn::ModelKind::cnn;
  cnn.channels = {4, 8};
  cnn.kernel_size = 3;
  cnn.fc_hidden = {16};
  ModelSpec gpt;
  gpt.kind = nn::ModelKind::gpt;
  gpt.n_layer = 2;
  gpt.n_head = 2;
  gpt.n_embd = 16;
  ModelSpec llama;
  llama.kind = nn::ModelKind::llama;
  llama.n_layer = 3;
  llama.n_head = 4;
  llama.n_kv_head = 2;
  llama.n_embd = 16;
  llama.ffn_hidden = 24;
  ModelSpec tied = llama;
  tied.tie_embeddings = true;
  return {{"mlp", mlp, Shape{1, 28, 28}, 10, false},
          {"llama, tied embeddings", tied, Shape{12}, 32, true},
          {"llama", llama, Shape{12}, 32, true},
          {"llama, bf16 activations", llama, Shape{12}, 32, true, DType::bf16},
          {"llama, selective", llama, Shape{12}, 32, true, DType::f32, Recompute::selective},
          {"llama, full", llama, Shape{12}, 32, true, DType::bf16, Recompute::full},
          {"llama, full every 2nd", llama, Shape{12}, 32, true, DType::f32, Recompute::full, 2},
          {"llama, selective every 2nd", llama, Shape{12}, 32, true, DType::bf16, Recompute::selective, 2},
          {"cnn", cnn, Shape{1, 28, 28}, 10, false},
          {"gpt", gpt, Shape{12}, 32, true},
          {"gpt, bf16 activations", gpt, Shape{12}, 32, true, DType::bf16}};
}

Tensor input(const Case& c, int64_t batch) {
  Tensor x = Tensor::zeros(batched(batch, c.sample), c.tokens ? DType::i32 : DType::f32);
  if (c.tokens)
    for (int64_t i = 0; i < x.numel(); ++i) x.i32()[i] = int32_t(i % c.classes);
  return x;
}

int64_t current() { return memory_stats(Device::cpu()).current_bytes; }

}  // namespace

TEST(ModelMemory, ActivationBytesAreWhatTheModelsAllocate) {
  for (const Case& c : cases()) {
    auto model = build_model(c.spec, c.sample, c.classes);
    model->initialize(1);
    model->set_activation_dtype(c.activations);
    model->set_activation_checkpointing(c.recompute, c.every);
    const int64_t train_batch = 6, eval_batch = 9;
    // Training: forward and backward at the training batch.
    Tensor x = input(c, train_batch), xe = input(c, eval_batch);
    Tensor dlogits = Tensor::zeros(batched(train_batch, model->output_sample()));
    const int64_t before = current();
    model->forward(x);  // the logits are a view of the last Block's buffer
    model->backward(dlogits);
    EXPECT_EQ(current() - before, model->activation_bytes(train_batch, true)) << c.name;
    // Evaluation at a larger batch: the Blocks' buffers grow to it (the old
    // ones freed), the backward buffers stay at the training batch.
    (void)model->forward(xe);
    EXPECT_EQ(current() - before, model->activation_bytes(eval_batch, false) +
                                      model->activation_bytes(train_batch, true) -
                                      model->activation_bytes(train_batch, false))
        << c.name;
  }
}
