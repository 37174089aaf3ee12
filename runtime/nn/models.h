// The reference models, built from a ModelSpec (the [model] config section).
#pragma once

#include "runtime/core/enum_names.h"
#include "runtime/nn/model.h"

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardtrain::nn {

// custom: a model a program registered (model_registry.h), named by
// ModelSpec::name.
enum class ModelKind { mlp, cnn, gpt, llama, custom };
inline std::span<const EnumName<ModelKind>> enum_names(ModelKind) {
  static constexpr std::array<EnumName<ModelKind>, 5> n = {{{ModelKind::mlp, "mlp"},
                                                            {ModelKind::cnn, "cnn"},
                                                            {ModelKind::gpt, "gpt"},
                                                            {ModelKind::llama, "llama"},
                                                            {ModelKind::custom, "custom"}}};
  return n;
}
// A language model: samples of token ids, next-token labels.
inline bool is_language_model(ModelKind kind) { return kind == ModelKind::gpt || kind == ModelKind::llama; }

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
                                            // llama: the longest sequence; 0 = the sample length T
  int64_t n_kv_head = 0;                    // llama: key/value heads (divides n_head); 0 = n_head
  int64_t ffn_hidden = 0;                   // llama: SwiGLU's inner width; 0 = llama_ffn_hidden(n_embd)
  double rope_theta = 10000.0;              // llama: RoPE's base
  double norm_eps = 1e-5;                   // llama: RMSNorm's epsilon
  bool tie_embeddings = false;              // llama: the head's weight is the token embedding
  std::string name;                         // custom: the registered model's name
  std::map<std::string, double> options;    // custom: its options (model_registry.h)
};

// The model's name in logs, the MLPerf log and checkpoints: the kind, or a
// custom model's registered name.
std::string model_name(const ModelSpec& spec);

// Llama's default SwiGLU width: 2/3 of 4C, rounded up to a multiple of 256
// (11008 for C = 4096, as Llama-2 7B).
int64_t llama_ffn_hidden(int64_t n_embd);

// MLP: one Block per hidden layer (linear + relu), then a linear head Block.
// CNN: one Block per conv stage (conv + relu + 2x2 max-pool), then a head
// Block (hidden linear + relu layers, then the output linear).
// GPT: samples are T int32 token ids [T] (input_sample = {T}); output logits
// [T, V]. Blocks: "embed" (token + position Embedding), "h0".."h{n-1}"
// (TransformerBlock), "head" (LayerNorm + Linear(C, V) without bias, not tied
// to the token embedding). num_classes is the vocabulary (next-token labels).
// Llama: the same samples and logits. Blocks: "embed" (token Embedding, no
// position table), "h0".."h{n-1}" (LlamaBlock, sharing one LlamaWorkspace),
// "head" (RmsNorm + Linear(C, V) without bias).
// Custom: the Blocks the registered builder returns (model_registry.h).
// An Error naming the [model] key out of range (what build_model would
// refuse before it sees the data); for a custom model, an unregistered name
// or an option it does not declare.
void validate(const ModelSpec& spec);

// layout_only: see Model (for `plan`).
std::unique_ptr<Model> build_model(const ModelSpec& spec, const Shape& input_sample, int64_t num_classes,
                                   bool layout_only = false);

}  // namespace shardtrain::nn
