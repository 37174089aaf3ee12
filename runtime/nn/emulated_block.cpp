#include "runtime/nn/emulated_block.h"

#include "runtime/core/compute_clock.h"
#include "runtime/core/error.h"

#include <fmt/format.h>

namespace shardtrain::nn {

EmulatedBlock::EmulatedBlock(std::unique_ptr<Block> real, double forward_s, double backward_s, int64_t profiled_batch,
                             const Shape& in_sample)
    : Block(real->name()),
      real_(std::move(real)),
      forward_s_(forward_s),
      backward_s_(backward_s),
      profiled_batch_(profiled_batch),
      out_sample_numel_(real_->output_shape(in_sample).numel()) {
  ST_CHECK(forward_s >= 0 && backward_s >= 0 && profiled_batch > 0,
           "emulated Block {}: times {} s and {} s for {} samples", name(), forward_s, backward_s, profiled_batch);
}

Tensor EmulatedBlock::forward(const Tensor& in) {
  const int64_t batch = in.dim(0);
  Shape sample;
  for (int d = 1; d < in.shape().ndim(); ++d) sample.push_back(in.dim(d));
  const Shape out = batched(batch, real_->output_shape(sample));
  if (!output_.defined() || batch > batch_ || output_.device() != in.device()) {
    output_ = Tensor::zeros(out, DType::f32, in.device());
    batch_ = batch;
  }
  compute_clock().run(forward_s_ * share(batch));
  return output_.view(0, out);
}

void EmulatedBlock::backward(const Tensor& dout, const Tensor&, bool) {
  compute_clock().run(backward_s_ * share(dout.dim(0)));
}

void EmulatedBlock::release_activations() {
  output_ = Tensor();
  batch_ = 0;
}

std::string EmulatedBlock::describe() const {
  return fmt::format("{} [emulated: {:.3g} + {:.3g} ms per {} samples]", real_->describe(), forward_s_ * 1e3,
                     backward_s_ * 1e3, profiled_batch_);
}

int64_t EmulatedBlock::activation_bytes(int64_t batch) const {
  return batch * out_sample_numel_ * int64_t(sizeof(float));
}

}  // namespace shardtrain::nn
