// What a layer declares about each of its parameters: name, shape, how to
// initialize it, and whether weight decay applies. The model lays all of them
// out in one flat buffer (flat_parameters.h).
#pragma once

#include "runtime/core/shape.h"
#include "runtime/core/tensor.h"

#include <string>

namespace shardtrain::nn {

enum class Init {
  fan_in_uniform,  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's Linear/Conv default
  normal,          // N(0, std^2): embeddings, GPT-style projections
  zeros,
  ones,
};

struct ParamSpec {
  std::string name;  // within its layer, e.g. "weight"
  Shape shape;
  Init init = Init::fan_in_uniform;
  int64_t fan_in = 1;  // for fan_in_uniform
  float std = 0.02f;   // for normal
  bool decay = true;   // weight decay applies (matrices yes; biases and norm gains no)
};

// A parameter two layers use (tied embeddings): the layer that declares it
// writes its current views here whenever it is bound, the other reads them
// at each forward and backward. Its gradient is the sum of both uses: the
// user that runs backward first overwrites or accumulates as it is told,
// the declaring layer's backward, which runs last, always adds.
struct TiedWeight {
  Tensor weight, grad;
};

}  // namespace shardtrain::nn
