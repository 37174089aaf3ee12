#include "residual_mlp.h"

#include "residual_unit.h"
#include "shardtrain/model.h"

#include <fmt/format.h>

namespace resmlp {

using namespace shardtrain;

namespace {

using Layers = std::vector<std::unique_ptr<nn::Layer>>;

nn::BlockList build(const nn::ModelContext& m) {
  const int64_t width = m.int_option("width"), hidden = m.int_option("hidden"), units = m.int_option("blocks");
  ST_CHECK(width > 0 && hidden > 0 && units >= 0,
           "residual_mlp: width and hidden must be positive, blocks not "
           "negative (got {}, {}, {})",
           width, hidden, units);
  nn::BlockList blocks;
  Layers stem;
  stem.push_back(std::make_unique<nn::Linear>(m.input_sample().numel(), width));  // an image is flattened
  stem.push_back(std::make_unique<nn::ReLU>());
  Shape shape = nn::add_sequential_block(blocks, "stem", std::move(stem), m.input_sample());
  for (int64_t i = 0; i < units; ++i) {
    Layers unit;
    unit.push_back(std::make_unique<ResidualUnit>(width, hidden));
    shape = nn::add_sequential_block(blocks, fmt::format("res{}", i), std::move(unit), shape);
  }
  Layers head;
  head.push_back(std::make_unique<nn::Linear>(width, m.num_classes()));
  nn::add_sequential_block(blocks, "head", std::move(head), shape);
  return blocks;
}

}  // namespace

void register_residual_mlp() {
  nn::ModelDefinition d;
  d.description = "residual MLP: linear stem, residual units x + W2 relu(W1 x), linear head";
  d.options = {{"width", 256, "the residual stream's width"},
               {"hidden", 512, "each unit's inner width"},
               {"blocks", 3, "residual units, one Block each"}};
  d.build = build;
  nn::register_model("residual_mlp", std::move(d));
}

}  // namespace resmlp
