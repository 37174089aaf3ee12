// Gradient checks for a Layer or Block of one's own (docs/custom-models.md):
// its backward against central differences of its forward. The loss is
// sum(out * r) for a fixed random r, so dL/dout = r and every output
// element counts. Parameters and the input are random (not the layer's
// initialization: a gain of exactly 1 or a bias of 0 hides mistakes), and
// checked element by element, up to max_per_tensor of each tensor, spread
// over it. Also checked: the conventions of layer.h, that backward
// overwrites parameter gradients, or adds to them when `accumulate`.
#pragma once

#include "runtime/nn/block.h"

#include <cstdint>
#include <string>

namespace shardtrain::nn {

struct GradientCheckOptions {
  int64_t batch = 3;
  uint64_t seed = 1;
  float step = 1e-3f;           // the central difference's h
  double abs_tolerance = 2e-3;  // |analytic - numeric| <= abs + rel * |numeric|
  double rel_tolerance = 3e-2;
  int64_t max_per_tensor = 64;  // elements checked per parameter (and of the input)
};

struct GradientCheckResult {
  int64_t checked = 0;        // elements compared
  int64_t failed = 0;         // beyond the tolerance, or a broken convention
  std::string first_failure;  // the first of them, e.g. "param 0.up.weight[17]: analytic 0.12, numeric 0.31"
  double worst_excess = 0.0;  // the largest |analytic - numeric| / (abs + rel * |numeric|)
  bool passed() const { return checked > 0 && failed == 0; }
  // One line: passed or failed, counts, the first failure.
  std::string summary() const;
};

// For samples of shape `in_sample` (no batch); the layer or block is bound
// to parameters the check allocates (bind again before training it).
GradientCheckResult check_gradients(Layer& layer, const Shape& in_sample, const GradientCheckOptions& options = {});
GradientCheckResult check_gradients(Block& block, const Shape& in_sample, const GradientCheckOptions& options = {});

}  // namespace shardtrain::nn
