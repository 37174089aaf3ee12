// Models defined outside the library (docs/custom-models.md). A program
// registers a builder under a name before it loads a config; a config with
// model.kind = "custom" and model.name = that name then trains it with the
// same strategies, data pipeline, checkpoints and telemetry as the built-in
// models. The builder returns Blocks (block.h) made of the library's Layers
// or of the program's own (layer.h).
#pragma once

#include "runtime/nn/block.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace shardtrain::nn {

struct ModelSpec;

// A number the model takes from the config, model.options.<name>.
struct ModelOption {
  std::string name;
  double default_value = 0.0;
  std::string doc;  // one line: what it sets
};

// What a builder is given: the data's shapes and the [model] section.
class ModelContext {
 public:
  ModelContext(const ModelSpec& spec, const std::vector<ModelOption>& declared, const Shape& input_sample,
               int64_t num_classes);

  // One sample's shape, without the batch: [1, 28, 28] for Fashion-MNIST.
  const Shape& input_sample() const { return input_sample_; }
  int64_t num_classes() const { return num_classes_; }
  // The whole [model] section: a builder may read the built-in models'
  // keys too (model.hidden, model.channels, ...).
  const ModelSpec& spec() const { return spec_; }
  // model.options.<name>, or the option's default; an Error for a name the
  // definition does not declare.
  double option(std::string_view name) const;
  // The same, as a whole number (an Error where it is not one).
  int64_t int_option(std::string_view name) const;

 private:
  const ModelSpec& spec_;
  const std::vector<ModelOption>& declared_;
  Shape input_sample_;
  int64_t num_classes_;
};

using BlockList = std::vector<std::unique_ptr<Block>>;

struct ModelDefinition {
  std::string description;           // one line, in `[init]` and in errors
  std::vector<ModelOption> options;  // every model.options key it takes
  // Blocks in order; the last one's output sample is [num_classes] (the
  // logits a classifier's loss reads). It must not allocate activations:
  // a plan builds the model without computing.
  std::function<BlockList(const ModelContext&)> build;
};

// An Error for an empty or taken name, a definition without a builder, or
// two options of one name.
void register_model(const std::string& name, ModelDefinition definition);
// Null where no model of that name is registered.
const ModelDefinition* find_model(std::string_view name);
// The registered names, sorted.
std::vector<std::string> registered_models();

// An Error where `name` is not registered (naming those that are) or
// `options` holds a key the definition does not declare.
const ModelDefinition& checked_model(std::string_view name, const std::map<std::string, double>& options);

}  // namespace shardtrain::nn
