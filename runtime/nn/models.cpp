#include "runtime/nn/models.h"

#include "runtime/nn/activation.h"
#include "runtime/nn/conv2d.h"
#include "runtime/nn/embedding.h"
#include "runtime/nn/layernorm.h"
#include "runtime/nn/linear.h"
#include "runtime/nn/llama_block.h"
#include "runtime/nn/maxpool2d.h"
#include "runtime/nn/model_registry.h"
#include "runtime/nn/rmsnorm.h"
#include "runtime/nn/transformer.h"

namespace shardtrain::nn {
namespace {

using Layers = std::vector<std::unique_ptr<Layer>>;

// Hidden linear+relu layers then the output linear, as one block's layers.
Layers classifier_layers(int64_t in, const std::vector<int64_t>& hidden, int64_t classes) {
  Layers layers;
  for (int64_t width : hidden) {
    layers.push_back(std::make_unique<Linear>(in, width));
    layers.push_back(std::make_unique<ReLU>());
    in = width;
  }
  layers.push_back(std::make_unique<Linear>(in, classes));
  return layers;
}

std::vector<std::unique_ptr<Block>> mlp(const ModelSpec& spec, Shape shape, int64_t classes) {
  std::vector<std::unique_ptr<Block>> blocks;
  int64_t in = shape.numel();
  for (size_t i = 0; i < spec.hidden.size(); ++i) {
    Layers layers;
    layers.push_back(std::make_unique<Linear>(in, spec.hidden[i]));
    layers.push_back(std::make_unique<ReLU>());
    shape = add_sequential_block(blocks, fmt::format("fc{}", i), std::move(layers), shape);
    in = spec.hidden[i];
  }
  add_sequential_block(blocks, "head", classifier_layers(in, {}, classes), shape);
  return blocks;
}

std::vector<std::unique_ptr<Block>> cnn(const ModelSpec& spec, Shape shape, int64_t classes) {
  ST_CHECK(shape.ndim() == 3, "model.kind = \"cnn\" needs image samples [C, H, W], the data has {}", shape.str());
  std::vector<std::unique_ptr<Block>> blocks;
  for (size_t i = 0; i < spec.channels.size(); ++i) {
    Layers layers;
    layers.push_back(std::make_unique<Conv2d>(shape[0], spec.channels[i], spec.kernel_size, 1, spec.kernel_size / 2));
    // Pool, then ReLU: the same outputs and gradients as ReLU then pool, bit
    // for bit (ReLU is monotonic, so the max of the ReLUs is the ReLU of the
    // max; where the window's max is <= 0 both give 0 and a 0 gradient), with
    // the ReLU on a quarter of the elements.
    layers.push_back(std::make_unique<MaxPool2d>(2, 2));
    layers.push_back(std::make_unique<ReLU>());
    shape = add_sequential_block(blocks, fmt::format("conv{}", i), std::move(layers), shape);
  }
  add_sequential_block(blocks, "head", classifier_layers(shape.numel(), spec.fc_hidden, classes), shape);
  return blocks;
}

std::vector<std::unique_ptr<Block>> gpt(const ModelSpec& spec, Shape shape, int64_t classes) {
  ST_CHECK(shape.ndim() == 1, "model.kind = \"gpt\" needs samples of T token ids [T], the data has {}", shape.str());
  const int64_t T = shape[0], C = spec.n_embd;
  const int64_t V = spec.vocab_size > 0 ? spec.vocab_size : classes;
  const int64_t positions = spec.block_size > 0 ? spec.block_size : T;
  ST_CHECK(spec.vocab_size <= 0 || spec.vocab_size == classes,
           "model.vocab_size = {} but the data has {} classes (next-token labels)", spec.vocab_size, classes);
  ST_CHECK(T <= positions, "sequences of {} tokens exceed model.block_size = {}", T, positions);
  ST_CHECK(spec.n_layer > 0 && spec.n_head > 0 && C > 0 && C % spec.n_head == 0,
           "gpt needs n_layer > 0 and n_embd ({}) divisible by n_head ({}), n_layer {}", C, spec.n_head, spec.n_layer);
  std::vector<std::unique_ptr<Block>> blocks;
  Layers embed;
  embed.push_back(std::make_unique<Embedding>(V, positions, C));
  shape = add_sequential_block(blocks, "embed", std::move(embed), shape);
  for (int64_t i = 0; i < spec.n_layer; ++i)
    blocks.push_back(std::make_unique<TransformerBlock>(fmt::format("h{}", i), T, C, spec.n_head, spec.n_layer));
  Layers head;
  head.push_back(std::make_unique<LayerNorm>(C));
  head.push_back(std::make_unique<Linear>(C, V, /*bias=*/false));
  add_sequential_block(blocks, "head", std::move(head), shape);
  return blocks;
}

std::vector<std::unique_ptr<Block>> llama(const ModelSpec& spec, Shape shape, int64_t classes) {
  ST_CHECK(shape.ndim() == 1, "model.kind = \"llama\" needs samples of T token ids [T], the data has {}", shape.str());
  const int64_t T = shape[0], C = spec.n_embd;
  const int64_t V = spec.vocab_size > 0 ? spec.vocab_size : classes;
  ST_CHECK(spec.vocab_size <= 0 || spec.vocab_size == classes,
           "model.vocab_size = {} but the data has {} classes (next-token labels)", spec.vocab_size, classes);
  ST_CHECK(spec.block_size <= 0 || T <= spec.block_size, "sequences of {} tokens exceed model.block_size = {}", T,
           spec.block_size);
  LlamaShape s;
  s.T = T;
  s.C = C;
  s.n_head = spec.n_head;
  s.n_kv_head = spec.n_kv_head > 0 ? spec.n_kv_head : spec.n_head;
  s.ffn_hidden = spec.ffn_hidden > 0 ? spec.ffn_hidden : llama_ffn_hidden(C);
  s.n_layer = spec.n_layer;
  s.rope_theta = float(spec.rope_theta);
  s.norm_eps = float(spec.norm_eps);
  std::vector<std::unique_ptr<Block>> blocks;
  auto tied = spec.tie_embeddings ? std::make_shared<TiedWeight>() : nullptr;
  Layers embed;
  auto embedding = std::make_unique<Embedding>(V, 0, C);
  if (tied) embedding->share_weight(tied);
  embed.push_back(std::move(embedding));
  shape = add_sequential_block(blocks, "embed", std::move(embed), shape);
  auto shared = std::make_shared<LlamaWorkspace>();
  for (int64_t i = 0; i < spec.n_layer; ++i)
    blocks.push_back(std::make_unique<LlamaBlock>(fmt::format("h{}", i), s, shared));
  Layers head;
  head.push_back(std::make_unique<RmsNorm>(C, s.norm_eps));
  auto classifier = std::make_unique<Linear>(C, V, /*bias=*/false);
  if (tied) classifier->use_tied_weight(tied);
  head.push_back(std::move(classifier));
  add_sequential_block(blocks, "head", std::move(head), shape);
  return blocks;
}

}  // namespace

int64_t llama_ffn_hidden(int64_t n_embd) {
  const int64_t two_thirds = 8 * n_embd / 3;
  return (two_thirds + 255) / 256 * 256;
}

std::string model_name(const ModelSpec& spec) {
  return spec.kind == ModelKind::custom ? spec.name : std::string(name_of(spec.kind));
}

void validate(const ModelSpec& spec) {
  if (spec.kind == ModelKind::custom) {
    ST_CHECK(!spec.name.empty(),
             "model.kind = \"custom\" needs model.name: the name the program registered its "
             "model under (docs/custom-models.md)");
    checked_model(spec.name, spec.options);
  } else {
    ST_CHECK(spec.name.empty() && spec.options.empty(),
             "model.name and model.options are for model.kind = \"custom\" (model.kind is \"{}\")", spec.kind);
  }
  for (int64_t w : spec.hidden) ST_CHECK(w > 0, "model.hidden widths must be positive, got {}", w);
  for (int64_t c : spec.channels) ST_CHECK(c > 0, "model.channels must be positive, got {}", c);
  for (int64_t w : spec.fc_hidden) ST_CHECK(w > 0, "model.fc_hidden widths must be positive, got {}", w);
  ST_CHECK(spec.kernel_size > 0 && spec.kernel_size % 2 == 1, "model.kernel_size must be odd and positive (got {})",
           spec.kernel_size);
  ST_CHECK(spec.n_layer >= 1 && spec.n_head >= 1 && spec.n_embd >= 1,
           "model.n_layer, model.n_head and model.n_embd must be at least 1");
  ST_CHECK(spec.n_embd % spec.n_head == 0, "model.n_embd ({}) must be divisible by model.n_head ({})", spec.n_embd,
           spec.n_head);
  ST_CHECK(spec.vocab_size >= 0 && spec.block_size >= 0,
           "model.vocab_size and model.block_size must not be negative (0: from the data)");
  ST_CHECK(spec.n_kv_head >= 0 && spec.ffn_hidden >= 0,
           "model.n_kv_head and model.ffn_hidden must not be negative (0: the default)");
  ST_CHECK(spec.n_kv_head == 0 || spec.n_head % spec.n_kv_head == 0,
           "model.n_kv_head ({}) must divide model.n_head ({}): each key/value head serves a group of query heads",
           spec.n_kv_head, spec.n_head);
  ST_CHECK(spec.kind != ModelKind::llama || (spec.n_embd / spec.n_head) % 2 == 0,
           "model.kind = \"llama\": the head size n_embd / n_head ({}) must be even for rotary positions",
           spec.n_embd / spec.n_head);
  ST_CHECK(spec.rope_theta > 0.0 && spec.norm_eps > 0.0, "model.rope_theta and model.norm_eps must be positive");
}

std::unique_ptr<Model> build_model(const ModelSpec& spec, const Shape& input_sample, int64_t num_classes,
                                   bool layout_only) {
  ST_CHECK(num_classes > 1, "a classifier needs at least 2 classes, the data has {}", num_classes);
  validate(spec);
  std::vector<std::unique_ptr<Block>> blocks;
  switch (spec.kind) {
    case ModelKind::mlp: blocks = mlp(spec, input_sample, num_classes); break;
    case ModelKind::cnn: blocks = cnn(spec, input_sample, num_classes); break;
    case ModelKind::gpt: blocks = gpt(spec, input_sample, num_classes); break;
    case ModelKind::llama: blocks = llama(spec, input_sample, num_classes); break;
    case ModelKind::custom: {
      const ModelDefinition& definition = checked_model(spec.name, spec.options);
      blocks = with_context(fmt::format("model \"{}\"", spec.name), [&] {
        return definition.build(ModelContext(spec, definition.options, input_sample, num_classes));
      });
      ST_CHECK(!blocks.empty(), "model \"{}\": its builder returned no Blocks", spec.name);
      break;
    }
  }
  auto model = std::make_unique<Model>(std::move(blocks), input_sample, layout_only);
  ST_CHECK(spec.kind != ModelKind::custom || model->output_sample() == Shape{num_classes},
           "model \"{}\" outputs samples of shape {}; a classifier's loss needs the logits of the data's {} "
           "classes, [{}]",
           spec.name, model->output_sample().str(), num_classes, num_classes);
  return model;
}

}  // namespace shardtrain::nn
