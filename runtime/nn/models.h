// The reference models, built from a ModelSpec (the [model] config section).
#pragma once

#include "runtime/nn/model.h"

#include <memory>
#include <string>
#include <vector>

namespace shardtrain::nn {

struct ModelSpec {
  std::string kind = "mlp";                  // "mlp" | "cnn"
  std::vector<int64_t> hidden{1024, 1024};   // mlp: hidden layer widths
  std::vector<int64_t> channels{32, 64};     // cnn: output channels of each conv stage
  int64_t kernel_size = 5;                   // cnn: square conv kernel (padded to keep H, W)
  std::vector<int64_t> fc_hidden{};          // cnn: hidden widths of the classifier head
};

// MLP: one Block per hidden layer (linear + relu), then a linear head Block.
// CNN: one Block per conv stage (conv + relu + 2x2 max-pool), then a head
// Block (hidden linear + relu layers, then the output linear).
std::unique_ptr<Model> build_model(const ModelSpec& spec, const Shape& input_sample,
                                   int64_t num_classes);

}  // namespace shardtrain::nn
