// The reference models, built from a ModelSpec (the [model] config section).
#pragma once

#include "runtime/core/enum_names.h"
#include "runtime/nn/model.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace shardtrain::nn {

enum class ModelKind { mlp, cnn, gpt };
inline std::span<const EnumName<ModelKind>> enum_names(ModelKind) {
  static constexpr std::array<EnumName<ModelKind>, 3> n = {
      {{ModelKind::mlp, "mlp"}, {ModelKind::cnn, "cnn"}, {ModelKind::gpt, "gpt"}}};
  return n;
}

struct ModelSpec {
  ModelKind kind = ModelKind::mlp;
  std::vector<int64_t> hidden{1024, 1024};  // mlp: hidden layer widths
  std::vector<int64_t> channels{32, 64};    // cnn: output channels of each conv stage
  int64_t kernel_size = 5;                  // cnn: square conv kernel (padded to keep H, W)
  std::vector<int64_t> fc_hidden{};         // cnn: hidden widths of the classifier head
  int64_t n_layer = 2;                      // gpt: transformer Blocks
  int64_t n_head = 4;                       // gpt: attention heads (divides n_embd)
  int64_t n_embd = 128;                     // gpt: channels C
  int64_t vocab_size = 0;                   // gpt: tokens V; 0 = the data's num_classes
  int64_t block_size = 0;                   // gpt: positions in wpe; 0 = the sample length T
};

// MLP: one Block per hidden layer (linear + relu), then a linear head Block.
// CNN: one Block per conv stage (conv + relu + 2x2 max-pool), then a head
// Block (hidden linear + relu layers, then the output linear).
// GPT: samples are T int32 token ids [T] (input_sample = {T}); output logits
// [T, V]. Blocks: "embed" (token + position Embedding), "h0".."h{n-1}"
// (TransformerBlock), "head" (LayerNorm + Linear(C, V) without bias, not tied
// to the token embedding). num_classes is the vocabulary (next-token labels).
// An Error naming the [model] key out of range (what build_model would
// refuse before it sees the data).
void validate(const ModelSpec& spec);

// layout_only: see Model (for `plan`).
std::unique_ptr<Model> build_model(const ModelSpec& spec, const Shape& input_sample, int64_t num_classes,
                                   bool layout_only = false);

}  // namespace shardtrain::nn
